#!/usr/bin/env bash
# The GPU numbers of issue 37 item 5, as one prepared run on a lent GPU machine.
#
# Usage (in the repository root, on the GPU machine; OUT names a folder for the logs):
#     OUT=/tmp/gpu bash benchmarks/gpu_session.sh
# Wheels the machine lacks (array-api-compat, dp-accounting, pure Python) are installed
# from ./.whl when that folder is there. Every step has its own time limit, so one
# that hangs costs its limit and the rest still run.
set -u
OUT=${OUT:-/tmp/gpu-session}
mkdir -p "$OUT"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
step() {  # step SECONDS NAME COMMAND...: runs COMMAND, its output also in $OUT/NAME.txt
    local limit=$1 name=$2
    shift 2
    echo "== $name (limit ${limit}s)"
    local start=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.txt" | grep -v Warning
    echo "== $name: exit ${PIPESTATUS[0]} after $((SECONDS - start))s"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
nproc
[ "${SKIP_CHECK:-0}" = 1 ] || step 120 gpu_check python3 benchmarks/gpu_check.py --sizes 1e7 1e8
step 60 marginal_bounds python3 benchmarks/gpu_marginal_bounds.py --sizes 1e7 1e8
scale="python3 benchmarks/support_scale.py --table adult-full --modes one-by-one"
# One cell at 10^8 under the profiler: where the build's time goes (proposal, copy, fit).
profile='import cProfile, pstats, runpy, sys
script, sys.argv = sys.argv[1], sys.argv[1:]
profile = cProfile.Profile()
try:
    profile.runcall(runpy.run_path, script, run_name="__main__")
finally:
    pstats.Stats(profile).sort_stats("cumulative").print_stats(45)'
step 150 scale_cuda_1e8 python3 -c "$profile" benchmarks/support_scale.py --cell \
    --table adult-full --modes one-by-one --sizes 100000000 --k 10 --device cuda --memory-gib 16
if [ "${FULL:-0}" = 1 ]; then
    step 80 scale_cuda_2e23 $scale --sizes 8388608 --k 100 --device cuda --memory-gib 2
    step 100 scale_cpu_2e23 $scale --sizes 8388608 --k 50 --device cpu --memory-gib 2
fi
