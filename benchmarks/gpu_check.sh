#!/usr/bin/env bash
# The device check on a GPU machine, from a bare one: a fresh venv with CUDA jax from the package
# registry and this project, then `benchmarks/gpu_check.py` (its sections, each under its own
# time limit, inside --budget seconds: 360 by default; the plan is printed first).
#
#   benchmarks/gpu_check.sh --out DIR                 # all sections
#   benchmarks/gpu_check.sh --out DIR --sections cartpole,precision
#
# VENV (default /tmp/jaxrl_fast_gpu_venv) is the venv to make; CUDA_JAX (default "jax[cuda12]")
# the jax requirement; PIP_ARGS extra pip arguments (e.g. "--no-index --find-links WHEELS" on a
# machine without the network). Arguments go to gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-/tmp/jaxrl_fast_gpu_venv}"
start=$(date +%s)
python3 -m venv "$venv"
# shellcheck disable=SC1091
. "$venv/bin/activate"
# shellcheck disable=SC2086
python -m pip install -q ${PIP_ARGS:-} --upgrade pip
# shellcheck disable=SC2086
python -m pip install -q ${PIP_ARGS:-} -e ".[atari,test,bench]" "${CUDA_JAX:-jax[cuda12]}"
echo "gpu_check.sh: installed in $(( $(date +%s) - start )) s"
export PYTHONUNBUFFERED=1
exec python benchmarks/gpu_check.py "$@"
