#!/usr/bin/env bash
# The GPU run (docs/gpu.md), ON a machine with a CUDA GPU and no package registry, from the repository root, after
# benchmarks/gpu/prepare.sh filled .gpu/ on a machine with internet and .gpu/ was copied beside the checkout:
#
#   bash benchmarks/gpu/run.sh [--log FILE] [STAGE ...]
#   bash benchmarks/gpu/run.sh queue --minutes N [--dry-run] [--queue FILE]
#
# Stages (default: all, in this order; setup always runs first, and `setup` alone runs only it):
#   setup     install .gpu/wheels into python3 with pip --no-index --no-deps (never a torch: the machine's CUDA
#             torch stays), then this checkout (editable, no build isolation); print the versions that matter
#   tests     pytest -m gpu tests/gpu, on the data in .gpu/data (BENCHBUILD_SHARED=.gpu, missing data fails)
#   scan      benchmarks/gpu/scan_speed.py: SCAN simple to 99% test exact match, transformer then BART
#   ensemble  benchmarks/gpu/ensemble_throughput.py --profile: stacked vs member loop, bf16, % of peak;
#             benchmarks/ensemble_decode_cache.py: cached member loop vs stacked beam search
#   react     benchmarks/gpu/react_stages.py: build-react with 10 members, wall time per stage
# Everything printed goes to one log: FILE, else $OUT/gpu-run.log, else .gpu/out/gpu-run.log. Extra pytest
# arguments: GPU_PYTEST_ARGS. Extra arguments for a benchmark: GPU_SCAN_ARGS, GPU_ENSEMBLE_ARGS, GPU_REACT_ARGS (e.g.
# GPU_SCAN_ARGS="--max-minutes 2"); their work folders go under GPU_WORK (default /tmp/benchbuild-gpu). Each stage
# takes about 3 to 8 minutes on an H100 by estimate; setup takes seconds and repeats harmlessly. Exits non-zero when
# a stage failed.
#
# queue: the items of benchmarks/gpu/QUEUE.md (or --queue FILE), in order. An item runs when its timeout_s fits in
# the minutes left of N (counted on the clock from the start; an item that does not fit is skipped and the next one
# tried) and it is not done. Its device command runs in `bash -c` from the repository root, under `timeout` with its
# timeout_s, with OUT=${OUT:-out/gpu-queue} exported (the folder its files go to), its output in $OUT/item-N.log.
# When the command exits 0, the file $OUT/done/N-SLUG records the item as done (SLUG: the title after "N. ",
# lower-cased, every run of characters other than a-z and 0-9 turned into one "-", trimmed of "-", cut to 60
# characters); an item recorded there is skipped. --dry-run runs and writes nothing: it prints, in order, each item it
# would run or skip and why, and the minutes planned (the sum of the timeouts it would run). Exits 2 on a missing or
# non-positive --minutes, 1 when an item that ran failed, else 0.
set -uo pipefail
CALLER_DIR=$PWD
cd "$(dirname "$0")/../.."

# --- queue: the items of QUEUE.md in order, within a budget of minutes ---------------------------------------------

queue_items() {
  # One line per item under "## Queue": number, timeout_s, slug, title, device command, separated by \x1f.
  LC_ALL=C awk '
    function fail(why) { print "run.sh queue: " FILENAME ": " why > "/dev/stderr"; bad = 1; exit 2 }
    function flush() {
      if (title == "") return
      if (timeout == "") fail("item " number " has no \"timeout_s: N\" line")
      if (lines != 1) fail("item " number " needs a device block of exactly one line")
      printf "%s\037%s\037%s\037%s\037%s\n", number, timeout, slug, title, command
      title = ""
    }
    /^## Queue[ \t]*$/ { inqueue = 1; next }
    inqueue && /^## / { flush(); inqueue = 0 }
    !inqueue { next }
    indevice && /^```/ { indevice = 0; next }
    indevice { command = $0; lines++; next }
    /^### / {
      flush()
      title = substr($0, 5)
      if (!match(title, /^[0-9]+\. /)) fail("an item title must start with its number: " $0)
      number = substr(title, 1, RLENGTH - 2)
      slug = tolower(substr(title, RLENGTH + 1))
      gsub(/[^a-z0-9]+/, "-", slug); sub(/^-+/, "", slug); slug = substr(slug, 1, 60); sub(/-+$/, "", slug)
      timeout = ""; command = ""; lines = 0
      next
    }
    title != "" && /^timeout_s: [0-9]+[ \t]*$/ { timeout = $2 + 0; next }
    title != "" && /^```device[ \t]*$/ { indevice = 1; next }
    END { if (!bad) flush() }
  ' "$1"
}

minutes() {  # seconds as minutes with one decimal (rounded down)
  printf '%d.%d' $(($1 / 60)) $((($1 % 60) * 10 / 60))
}

queue() {
  local budget="" dry=0 file=benchmarks/gpu/QUEUE.md
  while [ $# -gt 0 ]; do
    case $1 in
      --minutes) [ $# -ge 2 ] || { echo "run.sh queue: --minutes needs a value, a whole number of minutes above 0" >&2; return 2; }
                 budget=$2; shift 2 ;;
      --minutes=*) budget=${1#--minutes=}; shift ;;
      --dry-run) dry=1; shift ;;
      --queue) [ $# -ge 2 ] || { echo "run.sh queue: --queue needs a file" >&2; return 2; }
               file=$2; case $file in /*) ;; *) file="$CALLER_DIR/$file" ;; esac; shift 2 ;;
      -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; return 0 ;;
      *) echo "run.sh queue: unknown option '$1' (usage: run.sh queue --minutes N [--dry-run] [--queue FILE])" >&2
         return 2 ;;
    esac
  done
  if [ -z "$budget" ]; then
    echo "run.sh queue: --minutes N is required (the minutes of GPU time to fill, a whole number above 0)" >&2
    return 2
  fi
  if ! [[ $budget =~ ^[0-9]+$ ]] || [ $((10#$budget)) -le 0 ]; then
    echo "run.sh queue: --minutes must be a whole number of minutes above 0, not '$budget'" >&2
    return 2
  fi
  budget=$((10#$budget))
  if [ ! -f "$file" ]; then echo "run.sh queue: no queue file $file" >&2; return 2; fi
  local out=${OUT:-$PWD/out/gpu-queue}
  case $out in /*) ;; *) out="$CALLER_DIR/$out" ;; esac
  local records
  records=$(queue_items "$file") || return 2
  local -a items=()
  [ -n "$records" ] && mapfile -t items <<<"$records"

  local total=$((budget * 60)) start=$SECONDS planned=0 left record number timeout slug title command
  local done_file status took ran=() failed=() skipped=0
  echo "queue: ${#items[@]} items in ${file#"$PWD/"}, $budget minutes; done records in $out/done$( [ $dry -eq 1 ] && echo '; dry run: nothing runs')"
  for record in "${items[@]}"; do
    IFS=$'\037' read -r number timeout slug title command <<<"$record"
    done_file="$out/done/$number-$slug"
    if [ $dry -eq 1 ]; then left=$((total - planned)); else left=$((total - (SECONDS - start))); fi
    if [ -e "$done_file" ]; then
      echo "skip $title: done ($done_file)"; skipped=$((skipped + 1)); continue
    fi
    if [ "$timeout" -gt "$left" ]; then
      echo "skip $title: does not fit in the minutes left (needs $(minutes "$timeout") minutes, $(minutes $((left > 0 ? left : 0))) left)"
      skipped=$((skipped + 1)); continue
    fi
    planned=$((planned + timeout))
    if [ $dry -eq 1 ]; then
      echo "run  $title: up to $(minutes "$timeout") min (timeout_s $timeout)"; continue
    fi
    echo "run  $title: up to $(minutes "$timeout") min (timeout_s $timeout), started $(date -u '+%Y-%m-%d %H:%M:%S UTC'); log $out/item-$number.log"
    mkdir -p "$out/done"
    took=$SECONDS
    OUT=$out timeout --kill-after=10 "$timeout" bash -c "$command" >"$out/item-$number.log" 2>&1 </dev/null
    status=$?
    took=$((SECONDS - took))
    if [ $status -eq 0 ]; then
      printf 'item %s done %s: exit 0 after %d s\ncommand: %s\n' "$number" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$took" \
        "$command" >"$done_file"
      echo "     item $number: exit 0 after $took s; recorded in $done_file"
      ran+=("$number")
    else
      echo "     item $number: exit $status after $took s$( [ $status -eq 124 ] && echo ' (its timeout_s ran out)'); not recorded as done; last lines of its log:"
      tail -n 5 "$out/item-$number.log" | sed 's/^/       | /'
      failed+=("$number")
    fi
  done
  if [ $dry -eq 1 ]; then
    echo "planned: $(minutes $planned) of $budget minutes ($planned s); items to run: $(( ${#items[@]} - skipped )), skipped: $skipped"
    return 0
  fi
  echo "queue: $(minutes $((SECONDS - start))) of $budget minutes used; passed: ${ran[*]:-none}; failed: ${failed[*]:-none}; $skipped skipped"
  [ ${#failed[@]} -eq 0 ]
}

if [ "${1:-}" = queue ]; then
  shift
  queue "$@"
  exit $?
fi

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
    *) echo "run.sh: unknown stage or option '$1' (stages: setup tests scan ensemble react all; --log FILE; queue)" >&2
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
         "and copy .gpu/ beside this checkout" >&2
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
