#!/usr/bin/env bash
# The attention helper's GPU check, for the H200 (from the repo root, after `source .device/activate.sh`):
#   bash benchmarks/gpu_check_attention.sh
# 1. a smoke test with the per-block error report (MGPU_ATTENTION_DEBUG=1), mbarrier waits that trap after
#    10 s instead of hanging; 2. all attention GPU tests; 3. the benchmark against torch SDPA (cuDNN, flash).
# Logs go to $OUT (or /tmp); the benchmark's table is printed last. About 6-7 minutes.
set -u
cd "$(dirname "$0")/.."
LOGS="${OUT:-/tmp}/attention_check"
mkdir -p "$LOGS"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTEST=(python -m pytest -q -p no:cacheprovider -rfE)

echo "== 1. smoke test (debug report) =="
MGPU_ATTENTION_DEBUG=1 MGPU_LAB_MBARRIER_TIMEOUT_S=10 timeout 120 "${PYTEST[@]}" -s \
    "tests/test_attention_gpu.py::test_attention_head_dims[128]" \
    "tests/test_attention_gpu.py::test_attention_causal[128]" 2>&1 | tee "$LOGS/smoke.log" | tail -40

echo "== 2. attention GPU tests =="
MGPU_LAB_MBARRIER_TIMEOUT_S=10 timeout 240 "${PYTEST[@]}" tests/test_attention_gpu.py 2>&1 \
    | tee "$LOGS/tests.log" | tail -60

echo "== 3. benchmark =="
timeout 330 python benchmarks/bench_attention.py 2>&1 | tee "$LOGS/bench.log" | tail -40
