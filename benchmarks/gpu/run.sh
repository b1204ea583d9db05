#!/usr/bin/env bash
# The GPU kit's one command, on a machine that reaches no network: install the kit's wheels
# (benchmarks/gpu/wheels/, made by `python benchmarks/gpu/wheels.py` on a machine that does)
# into a target folder, put it and the project on PYTHONPATH, then run benchmarks/gpu/run.py.
#
#   benchmarks/gpu/run.sh --out DIR                  # every section, within 450 s (--budget S)
#   benchmarks/gpu/run.sh --cpu --tiny --out DIR     # the CPU dress rehearsal (tests/test_gpu_kit.py)
#
# Where there are no wheels (a machine with the packages installed, `pip install -e .`), the
# installed packages are used. KIT_WHEELS (default benchmarks/gpu/wheels) is the wheels'
# folder, KIT_SITE (default /tmp/jaxrl_fast_kit_site) the target, PYTHON (default python3) the
# interpreter. Arguments go to run.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
wheels="${KIT_WHEELS:-$here/wheels}"
site="${KIT_SITE:-/tmp/jaxrl_fast_kit_site}"
py="${PYTHON:-python3}"
export KIT_WHEELS="$wheels"
shopt -s nullglob
found=("$wheels"/*.whl)
if (( ${#found[@]} )); then
  start=$(date +%s)
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" "${found[@]}"
  echo "run.sh: installed ${#found[@]} wheel(s) from $wheels into $site in $(( $(date +%s) - start )) s"
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "run.sh: no wheels in $wheels: the packages installed for $py are used"
fi
export PYTHONPATH="$root:$root/benchmarks${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
exec "$py" "$here/run.py" "$@"
