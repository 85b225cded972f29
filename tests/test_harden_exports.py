"""Exports are valid files or a clear refusal, and the CLI answers bad inputs in one line (issue 30)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mgpu_lab.cli import main
from mgpu_lab.profiler.trace import Trace

REPO = Path(__file__).resolve().parents[1]


def trace_with_times(start: list[float], end: list[float]) -> Trace:
    n = len(start)
    return Trace(sm=[0] * n, block=[0] * n, unit=[0] * n, region=[0] * n, start_ns=start, end_ns=end, depth=[0] * n,
                 region_names=("r",), unit_kind="warpgroup", units_per_block=1, block_ids=[0], block_sm=[0],
                 block_start_ns=[0.0], block_end_ns=[100.0])


def _strict_json(text: str) -> object:
    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_chrome_json_refuses_nan_and_inf_times_with_their_count(tmp_path):
    trace = trace_with_times([0.0, float("nan"), 5.0], [1.0, 2.0, float("inf")])
    with pytest.raises(ValueError, match=r"to_chrome_json: start_ns/end_ns: expected finite times, got 2 of 3 "
                                         r"events with NaN or inf \(the first: event 1, nan to 2.0\)"):
        trace.to_chrome_json()
    with pytest.raises(ValueError, match="got 2 of 3 events"):
        trace.save_chrome_json(tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()  # refused before the file was opened


def test_chrome_json_of_finite_times_is_strict_json(tmp_path):
    path = trace_with_times([0.0, 1.5], [1.0, 2.25]).save_chrome_json(tmp_path / "t.json")
    events = _strict_json(path.read_text())["traceEvents"]
    assert [e["ts"] for e in events if e["ph"] == "X"] == [0.0, 0.0015]


def test_perfetto_refuses_nan_times_before_writing_anything():
    pytest.importorskip("perfetto")
    from mgpu_lab.profiler.perfetto_export import perfetto_chunks

    chunks = perfetto_chunks(trace_with_times([float("nan")], [1.0]))
    with pytest.raises(ValueError, match=r"perfetto export: start_ns/end_ns: expected finite times, got 1 of 1"):
        next(chunks)


@pytest.mark.parametrize("content", [b"\n\x02\x08\x01perfetto protobuf bytes", b'{"traceEvents": []}',
                                     b"plain text\n"])
@pytest.mark.parametrize("command", [["summary"], ["convert", "-o", "out.json"]])
def test_trace_cli_on_a_non_npz_file_is_one_line_exit_2(tmp_path, capsys, content, command, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "trace.pftrace"
    path.write_bytes(content)
    assert main(["trace", command[0], str(path), *command[1:]]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert (f"mgpu-lab trace: FILE: {str(path)!r} is not a trace saved by Trace.save: expected an .npz file "
            f"(a zip archive, starting with b'PK\\x03\\x04'), got a file starting with {content[:4]!r}") in err
    assert not (tmp_path / "out.json").exists()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SETUP = textwrap.dedent("""
    def problem():
        return dict(make_kernel=lambda **config: None, space={"block": [128]}, args=())
""")


@pytest.mark.parametrize("address, reason", [
    (f"tcp://127.0.0.1:{_closed_port()}", "ConnectionRefusedError"),
    ("not an address", "ValueError: missing port number"),
])
def test_tune_with_an_unreachable_scheduler_is_one_line_exit_2_at_once(tmp_path, address, reason):
    pytest.importorskip("distributed")
    (tmp_path / "setup_file.py").write_text(SETUP)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "mgpu_lab.cli", "tune", f"{tmp_path / 'setup_file.py'}:problem",
                          "--scheduler", address], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    elapsed = time.perf_counter() - started
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr, out.stderr
    assert (f"mgpu-lab tune: --scheduler: expected the address of a running Dask scheduler (tcp://host:8786), "
            f"got {address!r}, which cannot be reached ({reason}") in out.stderr
    assert elapsed < 20  # the process start and imports; Dask alone would wait 30 s
