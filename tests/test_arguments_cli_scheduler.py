"""`mgpu-lab tune --scheduler`: a Dask client or scheduler that goes away mid-tune ("IOLoop is
closed", "Client is closed") is one line on stderr and exit code 2, not a traceback."""

from __future__ import annotations

import pytest

pytest.importorskip("distributed")

import mgpu_lab.tuning  # noqa: E402
from mgpu_lab import cli  # noqa: E402


class _Client:
    """Stands in for the connected dask Client; `status` as Dask reports it."""

    def __init__(self, status: str = "running"):
        self.status = status

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _setup(tmp_path):
    setup = tmp_path / "problem.py"
    setup.write_text("def make(x):\n    raise AssertionError('never built')\n\n"
                     "problem = dict(make_kernel=make, space={'x': [1]}, args=())\n")
    return f"{setup}:problem"


@pytest.mark.parametrize("error, status", [
    (RuntimeError("IOLoop is closed"), "running"),
    (ValueError("something inside dask"), "closed"),
])
def test_a_lost_scheduler_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, error, status):
    monkeypatch.setattr(cli, "_connect_scheduler", lambda client_class, address: _Client(status))

    def tune(**kwargs):
        raise error

    monkeypatch.setattr(mgpu_lab.tuning, "tune", tune)
    assert cli.main(["tune", _setup(tmp_path), "--scheduler", "tcp://127.0.0.1:8786"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mgpu-lab tune: --scheduler: the connection to the Dask scheduler at "
                          "'tcp://127.0.0.1:8786' was lost during the tune") and "\n" not in err, err
    assert type(error).__name__ in err


def test_a_bug_while_connected_keeps_its_traceback(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_connect_scheduler", lambda client_class, address: _Client("running"))

    def tune(**kwargs):
        raise RuntimeError("a bug in mgpu_lab")

    monkeypatch.setattr(mgpu_lab.tuning, "tune", tune)
    with pytest.raises(RuntimeError, match="a bug in mgpu_lab"):
        cli.main(["tune", _setup(tmp_path), "--scheduler", "tcp://127.0.0.1:8786"])
