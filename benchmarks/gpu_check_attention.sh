#!/usr/bin/env bash
# The attention helper's GPU check, for the H200 (from the repo root, after `source .device/activate.sh`):
#   bash benchmarks/gpu_check_attention.sh
# 1. a smoke test printing its per-block error report (MGPU_ATTENTION_DEBUG=1); mbarrier waits trap after
#    10 s instead of hanging; 2. all attention GPU tests; 3. a profiled run's region summary; 4. the benchmark
#    against torch SDPA (cuDNN and flash backends), whose table is printed last.
# Logs go to $OUT/attention_check (or /tmp/attention_check). About 6 minutes; every stage has a timeout.
set -u
cd "$(dirname "$0")/.."
LOGS="${OUT:-/tmp}/attention_check"
mkdir -p "$LOGS"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PYTEST=(python -m pytest -q -p no:cacheprovider -rfE)

echo "== 1. smoke test (debug report) =="
MGPU_ATTENTION_DEBUG=1 MGPU_LAB_MBARRIER_TIMEOUT_S=10 timeout 90 "${PYTEST[@]}" -s \
    "tests/test_attention_gpu.py::test_attention_head_dims[128]" \
    "tests/test_attention_gpu.py::test_attention_causal[128]" \
    "tests/test_attention_gpu.py::test_attention_persistent[64-8-True]" \
    "tests/test_attention_gpu.py::test_attention_persistent[128-4-False]" 2>&1 | tee "$LOGS/smoke.log" | tail -40
if [ "${PIPESTATUS[0]}" -eq 124 ]; then
  echo "the smoke test hung (killed after 90 s): a barrier protocol never completes; skipping the rest"
  exit 1
fi

echo "== 2. attention GPU tests =="
MGPU_LAB_MBARRIER_TIMEOUT_S=10 timeout 200 "${PYTEST[@]}" tests/test_attention_gpu.py 2>&1 \
    | tee "$LOGS/tests.log" | tail -60

echo "== 3. profiled region summary (d 128, s 4096) =="
timeout 60 python benchmarks/bench_attention.py --profile 2>&1 | tee "$LOGS/profile.log" | tail -40

echo "== 4. benchmark =="
timeout 330 python benchmarks/bench_attention.py 2>&1 | tee "$LOGS/bench.log" | tail -40
