"""scripts/device_steps.sh: each step under its limit and the overall deadline, logs and records
packed into one archive, a summary line per step (CPU only: the steps here are shell commands)."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "scripts" / "device_steps.sh"


def test_steps_run_in_order_under_their_limits_and_come_back_packed(tmp_path):
    steps = tmp_path / "steps.txt"
    steps.write_text("# comment\n\nfirst 5 echo one; echo \"$OUT\" > \"$OUT/where.txt\"\n"
                     "stuck 1 sleep 5\nfailing 5 echo bad; exit 3\nlate 6 sleep 5\nnever 5 echo never\n")
    out = tmp_path / "out"
    done = subprocess.run(["bash", str(SCRIPT), str(steps)], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "OUT": str(out), "BUDGET_S": "23"})
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["first", "stuck", "failing", "late", "never"]
    assert lines[0].startswith("first rc=0") and lines[0].endswith("| one")
    assert lines[1].startswith("stuck rc=124")  # its own 1 s limit
    assert lines[2].startswith("failing rc=3") and lines[2].endswith("| bad")
    assert lines[3].startswith("late rc=0")  # started with 21 s or more left
    assert lines[4] == "never skipped (no time left)"  # under 20 s left after it
    with tarfile.open(out / "results.tgz") as archive:
        names = set(archive.getnames())
    assert {"r/first.log", "r/stuck.log", "r/failing.log", "r/where.txt"} <= names
    assert (out / "r" / "where.txt").read_text().strip() == str(out / "r")  # records land in $OUT/r
