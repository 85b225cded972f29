#!/usr/bin/env bash
# Runs GPU steps under one overall deadline, each under its own limit, and packs every log and
# record into $OUT/results.tgz (the device tool returns at most 8 files). For a leased GPU
# machine where a call has a fixed time: a step that would not fit is skipped and said so.
# From the repo root after `source .device/activate.sh`:
#   BUDGET_S=560 bash scripts/device_steps.sh STEPS_FILE
# STEPS_FILE: one step a line, "NAME LIMIT_S COMMAND..." (blank lines and # comments skipped), e.g.
#   host_cost 120 python benchmarks/bench_host_cost.py
#   gpu_core 400 bash scripts/gpu_tests.sh core
# Records go to $OUT/r (write_record's $OUT), logs to $OUT/r/NAME.log; a summary line per step
# (exit code, seconds, the log's last line) is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
steps_file="${1:?usage: device_steps.sh STEPS_FILE}"
base_out="${OUT:-/tmp/device_steps}"
export OUT="$base_out/r" PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
deadline=$(( $(date +%s) + ${BUDGET_S:-560} ))
summary=()
while read -r name limit command; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  left=$(( deadline - $(date +%s) ))
  if (( left < 20 )); then summary+=("$name skipped (no time left)"); continue; fi
  (( limit > left )) && limit=$left
  start=$(date +%s)
  timeout "$limit" bash -c "$command" > "$OUT/$name.log" 2>&1
  rc=$?
  summary+=("$name rc=$rc $(( $(date +%s) - start ))s | $(grep -v '^\s*$' "$OUT/$name.log" | tail -n 1 | cut -c1-160)")
done < "$steps_file"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
tar -C "$base_out" -czf "$base_out/results.tgz" r
printf '%s\n' "${summary[@]}"
