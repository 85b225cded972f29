#!/usr/bin/env bash
# The GEMM's GPU check in one go (H200, ~7-9 minutes): the GPU tests of the bf16 / fused /
# FP8 GEMMs (recorded as gpu_tests_gemm_*.json), then the tile tuner (writes
# mgpu_lab/examples/gemm_configs.json, copied to $OUT: commit it), then the sweep against
# cuBLAS and torch._scaled_mm (a `gemm` record). Each stage has a time limit so the whole
# stays under 9 minutes; the sweep's table is printed last.
#   bash benchmarks/gpu_check_gemm.sh            # everything
#   SKIP_TUNE=1 bash benchmarks/gpu_check_gemm.sh  # keep the committed configs
#   QUICK=1 bash benchmarks/gpu_check_gemm.sh      # 6 + 3 problems, for a smoke run
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-benchmarks/results}"
mkdir -p "$OUT"
quick=${QUICK:+--quick}
status=0

echo "== GEMM GPU tests"
MGPU_LAB_RECORD_NAME=gpu_tests_gemm timeout 200 python benchmarks/record_gpu_tests.py \
  tests/test_gemm_gpu.py tests/test_gemm_epilogues_gpu.py tests/test_gemm_fp8_gpu.py 2>&1 | tail -n 25 \
  || status=1

if [ -z "${SKIP_TUNE:-}" ]; then
  echo "== tuning tile sizes per problem"
  timeout 150 python benchmarks/tune_gemm_configs.py $quick 2>&1 | tail -n 45 || status=1
fi

echo "== sweep (bf16 vs cuBLAS, fp8 vs _scaled_mm)"
timeout 220 python benchmarks/bench_gemm.py $quick 2>&1 | tail -n 50 || status=1
exit $status
