#!/usr/bin/env bash
# Prepare the GPU run HERE, on a machine with a package registry: fill the git-ignored folder .gpu/ that travels to
# the GPU machine beside the working tree (docs/gpu.md; there, benchmarks/gpu/run.sh installs and runs it).
#
#   bash benchmarks/gpu/prepare.sh [GROUP ...]      groups of benchmarks/gpu/wheels.txt (default: core dask)
#
# .gpu/wheels/  the wheels of wheels.txt for CPython 3.12 (GPU_PYTHON_VERSION=...: another) on manylinux x86_64,
#               no dependencies resolved (the list names each one), versions from .venv (PYTHON=...: another
#               interpreter to read them from)
# .gpu/data/    the shared data the gpu tests and benchmarks read, copied from $BENCHBUILD_SHARED/data (default
#               ../shared/data): SCAN tasks.txt and the simple split, ReaCT's IWSLT14 files, the WMT14 sample
# Prints the size of .gpu and of everything that travels; fails above 60 MiB (what is copied to the GPU machine
# beside the checkout is kept under 64 MiB).
set -euo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-.venv/bin/python}
GPU_PYTHON_VERSION=${GPU_PYTHON_VERSION:-3.12}
SHARED_DATA=${BENCHBUILD_SHARED:-../shared}/data
GROUPS_WANTED=("$@")
[ ${#GROUPS_WANTED[@]} -eq 0 ] && GROUPS_WANTED=(core dask)
LIMIT_MIB=60

# name==version for every package of the wanted groups, once each.
pins=$("$PYTHON" - "${GROUPS_WANTED[@]}" <<'EOF'
import re
import sys
from importlib.metadata import PackageNotFoundError, version

wanted, group, pins = set(sys.argv[1:]), None, {}
for line in open("benchmarks/gpu/wheels.txt", encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    if line.startswith("["):
        group = line.strip("[]")
        continue
    if group not in wanted:
        continue
    name, _, pinned = line.partition("==")
    key = re.sub(r"[-_.]+", "-", name).lower()
    try:
        pins[key] = f"{name}=={pinned or version(name)}"
    except PackageNotFoundError:
        sys.exit(f"prepare.sh: {name} (group {group}) is not installed in this interpreter: pin it as {name}==VERSION")
unknown = wanted - {g.strip("[]") for g in re.findall(r"^\[\w+\]", open("benchmarks/gpu/wheels.txt").read(), re.M)}
if unknown:
    sys.exit(f"prepare.sh: no group {', '.join(sorted(unknown))} in benchmarks/gpu/wheels.txt")
print("\n".join(pins.values()))
EOF
)
mapfile -t PINS <<< "$pins"

rm -rf .gpu/wheels
mkdir -p .gpu/wheels
PLATFORMS=()
for tag in manylinux1_x86_64 manylinux2010_x86_64 manylinux2014_x86_64 \
           manylinux_2_17_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 manylinux_2_28_x86_64 \
           manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64; do
  PLATFORMS+=(--platform "$tag")
done
echo "downloading ${#PINS[@]} wheels (groups: ${GROUPS_WANTED[*]}): ${PINS[*]}"
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version "$GPU_PYTHON_VERSION" --implementation cp "${PLATFORMS[@]}" -d .gpu/wheels "${PINS[@]}"
if ls .gpu/wheels | grep -qiE '^(torch|nvidia|triton)[-_]'; then
  echo "prepare.sh: a torch/CUDA wheel is in .gpu/wheels: the GPU machine keeps its own torch" >&2
  exit 1
fi

if [ ! -d "$SHARED_DATA" ]; then
  echo "prepare.sh: $SHARED_DATA is absent: set BENCHBUILD_SHARED to the folder holding data/" >&2
  exit 1
fi
rm -rf .gpu/data
for file in scan/LICENSE scan/tasks.txt scan/simple_split/tasks_train_simple.txt \
            scan/simple_split/tasks_test_simple.txt \
            react/valid.de react/valid.en react/test.de react/test.en react/cg_test.de react/cg_test.en \
            wmt14-ende-sample/train.de wmt14-ende-sample/train.en; do
  mkdir -p ".gpu/data/$(dirname "$file")"
  cp "$SHARED_DATA/$file" ".gpu/data/$file"
done

ls -1 .gpu/wheels
gpu_bytes=$(du -sb .gpu | cut -f1)
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total=$((gpu_bytes + tree_bytes))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo ".gpu: $(mib "$gpu_bytes") (wheels $(mib "$(du -sb .gpu/wheels | cut -f1)"), data $(mib "$(du -sb .gpu/data | cut -f1)")); working tree: $(mib "$tree_bytes"); together: $(mib "$total")"
if [ "$total" -gt $((LIMIT_MIB * 1048576)) ]; then
  echo "prepare.sh: more than ${LIMIT_MIB} MiB would travel: drop a group (spaCy alone is ~85 MiB)" >&2
  exit 1
fi
echo "next, on the GPU machine (with .gpu copied beside the checkout): bash benchmarks/gpu/run.sh [--log FILE] [setup|tests|scan|ensemble|react|all ...]"
