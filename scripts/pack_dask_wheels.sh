#!/usr/bin/env bash
# Carries Dask distributed (the mgpu_lab[distributed] extra) to the GPU machine, which has no registry.
#   bash scripts/pack_dask_wheels.sh          (here)  -> .device/dask/wheels/*.whl  (~5 MB, under the 64 MiB carry limit)
#   source scripts/pack_dask_wheels.sh install (there, after `source .device/activate.sh`, with .device/dask carried)
# The GPU image already has click, cloudpickle, fsspec, jinja2, msgpack, packaging, psutil, pyyaml,
# sortedcontainers, toolz, urllib3 (/work/.library/device/KINDS.md); this packs the rest of dask's and
# distributed's requirements: dask, distributed, partd, locket, tblib, zict, tornado (tornado is also in
# pack.sh extras; a second copy is harmless). Ray was not an option: its wheel alone is ~60-70 MB.
DASK_WHEELS="${DASK_WHEELS:-dask==2026.8.0 distributed==2026.8.0 partd locket tblib zict tornado}"
if [ "${1:-pack}" = install ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/mgpu-site/site \
    .device/dask/wheels/*.whl && python3 -c "import distributed; print('distributed', distributed.__version__)"
  return 0 2>/dev/null || exit 0
fi
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
exclude="$(git rev-parse --git-common-dir)/info/exclude"  # a worktree's .git is a file
mkdir -p "$(dirname "$exclude")"
grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
mkdir -p .device/dask/wheels
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any)
# shellcheck disable=SC2086
python3 -m pip download -q --no-deps "${PLAT[@]}" -d .device/dask/wheels $DASK_WHEELS
du -sh .device/dask
