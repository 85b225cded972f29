#!/usr/bin/env bash
# The GEMM's GPU check in one go (H200, ~6-9 minutes): the GPU tests of the bf16 / fused /
# FP8 / block-scaled FP8 GEMMs (~100 tests), then the persistent and pingpong kernels' (~25,
# its own process), then the split-K GEMM's (~10, its own process; all recorded as
# gpu_tests_gemm*_*.json), then the tile tuner (without the persistent or split-K kernels if
# their tests failed) (writes mgpu_lab/kernels/gemm/configs.json, copied to $OUT: commit it),
# then the sweep against cuBLAS and torch._scaled_mm (a `gemm` record). Each stage has a time
# limit (120 + 80 + 90 + 110 + 170 s) so the whole stays under 10 minutes; the sweep's table is printed
# last, ending with the rows gemm_sweep (geomean, min vs cuBLAS) and gemm_fp8_sweep.
#   bash benchmarks/gpu_check_gemm.sh            # everything
#   SKIP_TUNE=1 bash benchmarks/gpu_check_gemm.sh  # keep the committed configs
#   QUICK=1 bash benchmarks/gpu_check_gemm.sh      # 6 + 3 problems, for a smoke run
set -uo pipefail
unset MGPU_LAB_MBARRIER_TIMEOUT_S
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# In the tests, a wrong barrier protocol traps after 10 s instead of hanging the stage (not in
# the tuner and the sweep: the timed-out wait reads %globaltimer on every barrier wait).
TRAP=10
OUT="${OUT:-benchmarks/results}"
mkdir -p "$OUT"
quick=${QUICK:+--quick}
status=0

echo "== GEMM GPU tests"
MGPU_LAB_MBARRIER_TIMEOUT_S=$TRAP MGPU_LAB_RECORD_NAME=gpu_tests_gemm timeout 120 python benchmarks/record_gpu_tests.py \
  tests/test_gemm_gpu.py tests/test_gemm_epilogues_gpu.py tests/test_gemm_fp8_gpu.py 2>&1 | tail -n 25 \
  || status=1
# its own process: a fault in the persistent kernel cannot take the tests above down with it
echo "== persistent GEMM GPU tests"
skip=""  # kernels whose tests failed: the tuner (and the sweep) leave them out
MGPU_LAB_MBARRIER_TIMEOUT_S=$TRAP MGPU_LAB_RECORD_NAME=gpu_tests_gemm_persistent timeout 80 python benchmarks/record_gpu_tests.py \
  tests/test_gemm_persistent_gpu.py 2>&1 | tail -n 12 || { status=1; skip="--no-persistent"; }
echo "== split-K GEMM GPU tests"
MGPU_LAB_MBARRIER_TIMEOUT_S=$TRAP MGPU_LAB_RECORD_NAME=gpu_tests_gemm_split_k timeout 90 python benchmarks/record_gpu_tests.py \
  tests/test_gemm_split_k_gpu.py 2>&1 | tail -n 12 || { status=1; skip="$skip --no-split-k"; }

if [ -z "${SKIP_TUNE:-}" ]; then
  echo "== tuning tile sizes per problem ${skip}"
  timeout 110 python benchmarks/tune_gemm_configs.py $quick $skip --budget-s 90 2>&1 | tail -n 45 || status=1
fi

echo "== sweep (bf16 vs cuBLAS, fp8 vs _scaled_mm)"
sweep_skip=""; case "$skip" in *--no-split-k*) sweep_skip="--no-split-k";; esac
timeout 170 python benchmarks/bench_gemm.py $quick $sweep_skip --budget-s 140 2>&1 | tail -n 50 || status=1
exit $status
