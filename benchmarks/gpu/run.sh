#!/usr/bin/env bash
# The GPU run (docs/gpu.md), ON a machine with an NVIDIA GPU and no package registry, from the repository
# root, after benchmarks/gpu/prepare.sh filled .gpu/ where pip reaches a registry and .gpu/ was copied along:
#
#   bash benchmarks/gpu/run.sh [--log FILE] [STAGE ...]
#
# Stages (default: all, in this order; setup always runs first, and `setup` alone runs only it):
#   setup     install .gpu/wheels into python3 with pip --no-index --no-deps (never a torch: the machine's CUDA
#             torch stays), then this checkout (editable, no build isolation); print the versions that matter
#   tests     pytest -m gpu tests/gpu, on the data in .gpu/data (BENCHBUILD_SHARED=.gpu, missing data fails)
#   scan      benchmarks/gpu/scan_speed.py: SCAN simple to 99% test exact match, transformer then BART (item 2)
#   ensemble  benchmarks/gpu/ensemble_throughput.py --profile: stacked vs member loop, bf16, % of peak (item 4);
#             benchmarks/ensemble_decode_cache.py: cached member loop vs stacked beam search
#   react     benchmarks/gpu/react_stages.py: build-react with 10 members, wall time per stage (item 5)
# Everything printed goes to one log: FILE, else $OUT/gpu-run.log (the device tool's output folder), else
# .gpu/out/gpu-run.log. Extra pytest arguments: GPU_PYTEST_ARGS. Extra arguments for a benchmark: GPU_SCAN_ARGS, GPU_ENSEMBLE_ARGS, GPU_REACT_ARGS (e.g.
# GPU_SCAN_ARGS="--max-minutes 2"); their work folders go under GPU_WORK (default /tmp/benchbuild-gpu).
# A call of the device tool runs at most 10 minutes: give each stage its own call (`run.sh tests`, `run.sh scan`,
# `run.sh ensemble`, `run.sh react`, each about 3 to 8 minutes on an H100 by estimate; setup takes seconds and
# repeats harmlessly), carrying .gpu each time. Exits non-zero when a stage failed.
set -uo pipefail
cd "$(dirname "$0")/../.."

LOG=""
STAGES=()
SETUP_ONLY=0
while [ $# -gt 0 ]; do
  case $1 in
    --log) LOG=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    setup) SETUP_ONLY=1; shift ;;
    tests|scan|ensemble|react) STAGES+=("$1"); shift ;;
    all) STAGES+=(tests scan ensemble react); shift ;;
    *) echo "run.sh: unknown stage or option '$1' (stages: setup tests scan ensemble react all; --log FILE)" >&2
       exit 2 ;;
  esac
done
[ ${#STAGES[@]} -eq 0 ] && [ $SETUP_ONLY -eq 0 ] && STAGES=(tests scan ensemble react)
if [ -z "$LOG" ]; then
  if [ -n "${OUT:-}" ]; then LOG="$OUT/gpu-run.log"; else LOG=.gpu/out/gpu-run.log; fi
fi
mkdir -p "$(dirname "$LOG")"

PYTHON=${PYTHON:-python3}
WORK=${GPU_WORK:-/tmp/benchbuild-gpu}
export BENCHBUILD_SHARED="$PWD/.gpu" BENCHBUILD_REQUIRE_SHARED=1 PYTHONUNBUFFERED=1

setup() {
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  if [ ! -d .gpu/wheels ] || [ ! -d .gpu/data ]; then
    echo "run.sh: .gpu/wheels or .gpu/data is missing: run benchmarks/gpu/prepare.sh where pip reaches a registry" \
         "and carry .gpu along" >&2
    return 1
  fi
  if ls .gpu/wheels | grep -qiE '^(torch|nvidia|triton)[-_]'; then
    echo "run.sh: .gpu/wheels holds a torch/CUDA wheel; refusing to replace the machine's torch" >&2
    return 1
  fi
  "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --find-links .gpu/wheels \
    .gpu/wheels/*.whl || return 1
  if ! "$PYTHON" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-build-isolation -e .; then
    echo "run.sh: the editable install failed; using PYTHONPATH=$PWD instead"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  fi
  "$PYTHON" -m pip list --disable-pip-version-check 2>/dev/null \
    | grep -iE '^(torch|transformers|accelerate|tokenizers|safetensors|datasets|pyarrow|fsspec|huggingface.hub|numpy|numba|typer|sacremoses|sacrebleu|dask|distributed|benchbuild) '
  "$PYTHON" -m pip check --disable-pip-version-check 2>/dev/null \
    | grep -iE '^(benchbuild|datasets|sacremoses|typer|pydantic|dask|distributed) ' || true
  "$PYTHON" - <<'EOF' || return 1
import torch

import benchbuild.cli, benchbuild.zoo, datasets, sacremoses  # noqa: F401, E401 - everything the stages import

if not torch.cuda.is_available():
    raise SystemExit("run.sh: torch sees no CUDA device here: the gpu tests would all skip")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}, "
      f"bf16 {torch.cuda.is_bf16_supported()}; datasets {datasets.__version__}")
EOF
}

tests() {
  # shellcheck disable=SC2086  # GPU_PYTEST_ARGS: extra pytest words (e.g. "-v" to see each test as it ends)
  "$PYTHON" -m pytest -m gpu tests/gpu -p no:cacheprovider -q -rs --durations=15 ${GPU_PYTEST_ARGS:-}
}

scan() {
  # shellcheck disable=SC2086  # the extra arguments are words
  "$PYTHON" benchmarks/gpu/scan_speed.py --work "$WORK/scan" ${GPU_SCAN_ARGS:-}
}

ensemble() {
  # shellcheck disable=SC2086
  "$PYTHON" benchmarks/gpu/ensemble_throughput.py --profile ${GPU_ENSEMBLE_ARGS:-}
  # Beam search: cached members one after another vs stacked (vmap) members recomputing the prefix, the GPU default.
  "$PYTHON" benchmarks/ensemble_decode_cache.py --device cuda --members 10 --sentences 64 --size iwslt
}

react() {
  # shellcheck disable=SC2086
  "$PYTHON" benchmarks/gpu/react_stages.py --work "$WORK/react" ${GPU_REACT_ARGS:-}
}

run_all() {
  echo "benchbuild GPU run, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null || echo 'no git')," \
       "stages: setup ${STAGES[*]}; log: $LOG"
  local failed=() stage started status
  for stage in setup "${STAGES[@]}"; do
    started=$SECONDS
    echo "=== $stage"
    "$stage"
    status=$?
    echo "=== $stage: exit $status after $((SECONDS - started)) s"
    if [ $status -ne 0 ]; then
      failed+=("$stage")
      [ "$stage" = setup ] && break  # nothing else can run
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}"
    return 1
  fi
  echo "all stages passed"
}

run_all 2>&1 | tee -a "$LOG"
exit "${PIPESTATUS[0]}"
