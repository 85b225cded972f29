"""benchmarks/common.py on the CPU: append-only records, clock/power sampling, A B B A interleaving."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402


def _fake_reader():
    readings = iter([(1980.0, 400.0), (1755.0, 650.0), (1830.0, 690.0)] + [(1830.0, 690.0)] * 10_000)
    return lambda: next(readings)


def test_write_record_never_overwrites(tmp_path, monkeypatch):
    monkeypatch.setenv("MGPU_LAB_COMMIT", "0123456789abcdef")
    with common.GpuSampler(interval_s=3600, reader=_fake_reader()) as gpu:
        gpu.sample()  # enter, this, exit: three readings
    first = common.write_record("bench_x", {"x_vs_y": 1.0}, sampler=gpu, out_dir=tmp_path)
    second = common.write_record("bench_x", {"x_vs_y": 2.0}, sampler=gpu, out_dir=tmp_path)
    assert first != second and first.exists() and second.exists()
    assert json.loads(first.read_text())["figures"] == {"x_vs_y": 1.0}
    assert json.loads(second.read_text())["figures"] == {"x_vs_y": 2.0}
    assert "01234567" in first.name and first.name.startswith("bench_x_20")
    record = json.loads(first.read_text())
    for key in ("device", "driver", "commit", "time_utc", "gpu"):
        assert key in record
    assert record["gpu"]["sm_clock_mhz"] == {"median": 1830.0, "min": 1755.0, "max": 1980.0}
    assert record["gpu"]["power_w"]["max"] == 690.0 and record["gpu"]["source"] == "given"
    names = [r["_file"] for r in common.load_records("bench_x", tmp_path)]
    assert sorted(names) == sorted([first.name, second.name])


def test_sampler_survives_a_failing_reader():
    def broken():
        raise RuntimeError("NVML went away")

    with common.GpuSampler(interval_s=0.01, reader=broken) as gpu:
        pass
    assert gpu.summary() == {"source": "given", "samples": 0, "sm_clock_mhz": None, "power_w": None}


def test_interleaved_rounds_alternates_a_b_b_a():
    calls = []

    def timer(fn):
        calls.append(fn(0))
        return SimpleNamespace(runs_ms=(1.0,) if calls[-1] == "A" else (2.0,))

    result = common.interleaved_rounds(lambda i: "A", lambda i: "B", rounds=4, timer=timer)
    assert "".join(calls) == "ABBAABBA" == "".join(result.order)
    assert result.a_ms == 1.0 and result.b_ms == 2.0 and result.ratio == 0.5
    with pytest.raises(ValueError, match="rounds"):
        common.interleaved_rounds(lambda i: 0, lambda i: 0, rounds=0, timer=timer)
