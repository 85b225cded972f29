"""Run the GPU test suite and record the run (date, device, commit, pass counts) as JSON.

    python benchmarks/record_gpu_tests.py [pytest args...]

Writes a record benchmarks/results/gpu_tests_<UTC time>_<commit>.json (or under $OUT when set; the
name from $MGPU_LAB_RECORD_NAME when set) naming device, driver and commit, and exits with pytest's
exit code. The record lists every GPU test with its outcome. Notebook runs are recorded the same
way: MGPU_LAB_MARKERS="gpu" MGPU_LAB_RECORD_NAME=gpu_notebooks python benchmarks/record_gpu_tests.py
tests/test_notebooks.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from common import write_record  # noqa: E402


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        code = pytest.main(["-m", os.environ.get("MGPU_LAB_MARKERS", "gpu"), "-q", "-p", "no:cacheprovider",
                            f"--junitxml={junit}",
                            "--rootdir", str(root), *(argv or [str(root / "tests")])])
        suite = ET.parse(junit).getroot()
    outcomes: dict[str, str] = {}
    for case in suite.iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcomes[name] = ("failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed")
    counts = {k: sum(v == k for v in outcomes.values()) for k in ("passed", "failed", "skipped")}
    path = write_record(os.environ.get("MGPU_LAB_RECORD_NAME", "gpu_tests"), {**counts, "pytest_exit_code": int(code)}, notes={"tests": outcomes})
    print(f"{counts} -> {path}")
    return int(code)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main(sys.argv[1:]))
