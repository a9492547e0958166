#!/usr/bin/env bash
# Fetch the pure-Python wheels kernelopt needs that the lent GPU machine's image lacks.
# The device has no package registry: wheels travel in .whl/ (git-ignored) via the device
# tool's `carry`, and each run installs them first:
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
#       --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
# Usage: scripts/device/fetch_wheels.sh [NAME==VERSION ...]   (default: scripts/device/wheels.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
specs=("$@")
if [ ${#specs[@]} -eq 0 ]; then
  # one spec per line; a '#' starts a comment, also after a spec
  mapfile -t specs < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' scripts/device/wheels.txt | grep -v '^[[:space:]]*$' || true)
fi
if [ ${#specs[@]} -eq 0 ]; then
  echo "nothing to fetch: every dependency is already in the device image (scripts/device/wheels.txt)"
  exit 0
fi
mkdir -p .whl
for spec in "${specs[@]}"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl "$spec"
done
ls -1 .whl
