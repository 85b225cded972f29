"""Run `mgpu-lab demo` and record its output with the device, driver and commit it ran on.

    python benchmarks/record_demo.py

Writes a record `demo_<UTC time>_<commit>.json` (or under $OUT) through benchmarks/common.py, so
a demo run in the README is the script's output, never a table assembled by hand. Exits with the
demo's exit code.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import GpuSampler, write_record  # noqa: E402


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    with GpuSampler() as gpu:
        done = subprocess.run([sys.executable, "-m", "mgpu_lab.cli", "demo"], capture_output=True, text=True,
                              cwd=root, timeout=1800)
    lines = done.stdout.splitlines()
    figures = {"exit_code": done.returncode, "output": lines,
               "checks_ok": sum(" ok " in f" {line} " for line in lines)}
    path = write_record("demo", figures, notes={"command": "mgpu-lab demo", "stderr_tail": done.stderr[-2000:]},
                        sampler=gpu)
    print(done.stdout, end="")
    print(f"record: {path}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
