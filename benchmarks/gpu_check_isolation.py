"""One command for the GPU machine: the runtime's GPU tests, then bench_launch.py and
bench_isolation.py, each under its own time limit (all together under 10 minutes), then a
short table of what passed and the recorded figures.

    python benchmarks/gpu_check_isolation.py        # from the repository root

Records land in benchmarks/results/ (or $OUT/): gpu_tests_runtime_*, launch_*, isolation_*,
and each step's full output in gpu_check_isolation_<step>.log beside them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(os.environ.get("OUT") or ROOT / "benchmarks" / "results")
GPU_TESTS = ["tests/test_isolation_gpu.py", "tests/test_errors_launch_gpu.py", "tests/test_examples_gpu.py",
             "tests/test_tma_gpu.py", "tests/test_profiler_device.py", "tests/test_multicast_gpu.py",
             "tests/test_export.py", "tests/test_torch_op_gpu.py"]
STEPS = [  # (name, command, seconds allowed)
    ("gpu_tests", [sys.executable, "benchmarks/record_gpu_tests.py", *GPU_TESTS, "-rs"], 240),
    ("bench_launch", [sys.executable, "benchmarks/bench_launch.py"], 60),
    ("bench_isolation", [sys.executable, "benchmarks/bench_isolation.py", "--budget-s", "160"], 240),
]


START = time.time()


def newest_record(name: str) -> dict:
    """Figures of the newest record `name` written by this run ({} when the step wrote none)."""
    files = sorted((p for p in RESULTS.glob(f"{name}_*.json") if p.stat().st_mtime >= START),
                   key=lambda p: p.stat().st_mtime)
    return json.loads(files[-1].read_text()).get("figures", {}) if files else {}


def run_step(name: str, command: list[str], limit_s: int) -> tuple[str, float, str]:
    env = dict(os.environ, MGPU_LAB_RECORD_NAME="gpu_tests_runtime")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    RESULTS.mkdir(parents=True, exist_ok=True)
    log = RESULTS / f"gpu_check_isolation_{name}.log"
    t0 = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit_s)
        output, status = done.stdout + done.stderr, f"exit {done.returncode}"
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        output += (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        status = f"TIMEOUT after {limit_s} s"
    seconds = time.perf_counter() - t0
    log.write_text(output)
    print(f"==== {name}: {status} in {seconds:.0f} s (log {log})")
    print("\n".join(output.strip().splitlines()[-25:]))
    return status, seconds, str(log)


def fmt(value, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec) if isinstance(value, float) else str(value)


def main() -> int:
    statuses = {name: run_step(name, command, limit) for name, command, limit in STEPS}
    tests, launch, iso = newest_record("gpu_tests_runtime"), newest_record("launch"), newest_record("isolation")
    rows = [
        ("step", "status", "figures"),
        ("gpu tests", statuses["gpu_tests"][0],
         f"passed {tests.get('passed', '-')}, failed {tests.get('failed', '-')}, skipped {tests.get('skipped', '-')}"),
        ("launch", statuses["bench_launch"][0],
         f"checked {fmt(launch.get('launch_us_ours_checked'), '.2f')} us vs RawKernel "
         f"{fmt(launch.get('launch_us_rawkernel'), '.2f')} us: launch_checked_vs_rawkernel "
         f"{fmt(launch.get('launch_checked_vs_rawkernel'))} (goal <= 1)"),
        ("isolation", statuses["bench_isolation"][0],
         f"survived {iso.get('isolation_faults_survived', '-')}/{iso.get('isolation_faults_injected', '-')}, "
         f"recovery {fmt(iso.get('isolation_recovery_s'), '.2f')} s, overhead "
         f"{fmt(iso.get('isolated_launch_overhead_us'), '.0f')} us per call"),
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print("\n" + "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in rows))
    return 0 if all(s[0] == "exit 0" for s in statuses.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
