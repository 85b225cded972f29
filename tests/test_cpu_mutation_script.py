"""scripts/mutation.py on the CPU: it must not record a module whose mutants mutmut never tested."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import mutation  # noqa: E402

TARGET = mutation.MODULES["profiler.decode"]


def _result(stdout: str, returncode: int = 1) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(["mutmut", "run"], returncode, stdout=stdout, stderr="")


@pytest.mark.parametrize("said", ["failed to collect stats. runner returned 1", "Failed to run clean test",
                                  "Stopping early, because we could not find any test case for any mutant",
                                  "FAILED: Unable to force test failures"])
def test_mutmut_giving_up_stops_the_run_with_its_output(said) -> None:
    with pytest.raises(RuntimeError, match="(?s)mutmut stats pass for mgpu_lab/profiler/decode.py failed .*" + re.escape(said)):
        mutation._check(_result(f"FAILED tests/test_x.py::test_y\n{said}\n"), TARGET, "stats pass")


def test_a_normal_run_and_an_unknown_exit_code() -> None:
    mutation._check(_result("    done\n", 0), TARGET, "run")
    mutation._check(_result("    done\n", 1), TARGET, "run")  # mutmut's exit code when mutants survive
    with pytest.raises(RuntimeError, match=r"failed \(exit 2\)"):
        mutation._check(_result("Traceback ...", 2), TARGET, "run")


def test_function_names_and_reasons() -> None:
    assert mutation._function_of("mgpu_lab.profiler.decode.x__as_rows__mutmut_3") == "_as_rows"
    assert mutation._function_of("mgpu_lab.runtime.portable.x\u01c1PortableLauncher\u01c1__init____mutmut_1") == \
        "PortableLauncher.__init__"
    reasons = {"m::f::abc": "equivalent: exact", "m::g::*": "GPU-only: pattern"}
    assert mutation._reason(reasons, "m::f::abc") == "equivalent: exact"
    assert mutation._reason(reasons, "m::g::123") == "GPU-only: pattern"
    assert mutation._reason(reasons, "m::h::123") == "unexplained"


def test_every_mapped_test_file_exists() -> None:
    root = Path(mutation.__file__).resolve().parents[1]
    missing = [t for target in mutation.MODULES.values() for t in target.tests if not (root / t).is_file()]
    assert missing == []
