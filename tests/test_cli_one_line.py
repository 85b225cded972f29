"""Every CLI subcommand, given bad input, fails with one line on stderr and exit code 2: no
traceback, run as a user runs it (a separate process)."""

from __future__ import annotations

import subprocess
import sys

import pytest

MAIN = "import sys; from mgpu_lab.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "notes.txt").write_text("not a trace\n")
    (tmp_path / "kernels.py").write_text("def broken():\n    raise RuntimeError('no kernel today')\n"
                                         "not_a_kernel = 42\n")
    return tmp_path


CASES = [
    (["compile", "{d}/missing.py:k"], "KERNEL"),
    (["compile", "{d}/kernels.py:broken"], "no kernel today"),
    (["compile", "{d}/kernels.py:not_a_kernel"], "neither a Kernel nor a function returning one"),
    (["export", "{d}/kernels.py:broken", "{d}/out.py"], "no kernel today"),
    (["export", "{d}/kernels.py:not_a_kernel", "{d}/out.py"], "neither a Kernel"),
    (["tune", "{d}/kernels.py:not_a_kernel"], "SETUP"),
    (["tune", "{d}/kernels.py"], "SETUP: expected FILE.py:NAME"),
    (["trace", "summary", "{d}/notes.txt"], "FILE"),
    (["trace", "summary", "{d}/missing.npz"], "does not exist"),
    (["trace", "convert", "{d}/notes.txt", "-o", "{d}/x.json"], "FILE"),
]


@pytest.mark.parametrize("argv, words", CASES, ids=[" ".join(a[:2]) + f" {i}" for i, (a, _) in enumerate(CASES)])
def test_a_failing_subcommand_says_so_in_one_line(files, argv, words):
    args = [a.format(d=files) for a in argv]
    run = subprocess.run([sys.executable, "-c", MAIN, *args], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, (args, run.returncode, run.stderr)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert words in lines[0], lines[0]
    assert not (files / "out.py").exists() and not (files / "x.json").exists(), "nothing half-written"
