#!/usr/bin/env bash
# Every GPU test on the GPU machine, in groups, each under its own time limit so that one hanging
# group cannot eat the whole call; each group is recorded (gpu_tests_<group>_*.json under $OUT or
# benchmarks/results/). From the repo root after `source .device/activate.sh`:
#   bash scripts/gpu_tests.sh [group ...]      # groups: core isolation gemm attention torch (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# A wrong barrier protocol traps after 10 s instead of hanging the group.
export MGPU_LAB_MBARRIER_TIMEOUT_S="${MGPU_LAB_MBARRIER_TIMEOUT_S:-10}"
LOGS="${OUT:-/tmp}"
declare -A FILES=(
  [isolation]="tests/test_isolation_gpu.py"
  [gemm]="tests/test_gemm_gpu.py tests/test_gemm_epilogues_gpu.py tests/test_gemm_fp8_gpu.py tests/test_gemm_persistent_gpu.py tests/test_gemm_split_k_gpu.py tests/test_gemm_swap_ab_gpu.py tests/test_gemm_stream_k_gpu.py"
  [attention]="tests/test_attention_gpu.py"
  [torch]="tests/test_torch_op_gpu.py tests/test_torch_linear_gpu.py"
)
# core: every other test, derived from the groups above so a file added to one runs only there
FILES[core]="tests --ignore=tests/browser"
for g in isolation gemm attention torch; do
  for f in ${FILES[$g]}; do FILES[core]+=" --ignore=$f"; done
done
declare -A LIMIT=([core]=400 [isolation]=120 [gemm]=430 [attention]=240 [torch]=120)
groups=("$@"); [ ${#groups[@]} -eq 0 ] && groups=(core isolation gemm attention torch)
status=0
summary=()
for g in "${groups[@]}"; do
  echo "== $g"
  # shellcheck disable=SC2086
  MGPU_LAB_RECORD_NAME="gpu_tests_$g" timeout "${LIMIT[$g]}" python benchmarks/record_gpu_tests.py \
      ${FILES[$g]} --continue-on-collection-errors -rfE > "$LOGS/gpu_tests_$g.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  summary+=("$g rc=$rc $(grep -E '^[0-9]+ (passed|failed)|passed|failed' "$LOGS/gpu_tests_$g.log" | tail -n 1)")
  grep -E '^(FAILED|ERROR)' "$LOGS/gpu_tests_$g.log" | head -n 15
done
printf '%s\n' "${summary[@]}"
exit $status
