"""Bounded work from untrusted traces (issue 30): a saved trace or a device buffer whose ids,
counts or sizes are out of their declared ranges is refused quickly, naming the field."""

from __future__ import annotations

import io
import json
import struct
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from mgpu_lab.compiler.compiled_kernel import ProfilerSpec
from mgpu_lab.profiler import format as fmt
from mgpu_lab.profiler.decode import decode_buffer
from mgpu_lab.profiler.trace import MAX_REGIONS, Trace


def small_trace() -> Trace:
    return Trace(sm=[4, 0], block=[0, 1], unit=[1, 0], region=[0, 1], start_ns=[0.0, 5.0], end_ns=[3.0, 9.0],
                 depth=[0, 0], region_names=("load", "mma"), unit_kind="warpgroup", units_per_block=2,
                 block_ids=[0, 1], block_sm=[4, 0], block_start_ns=[0.0, 4.0], block_end_ns=[4.0, 10.0],
                 kernel_name="k")


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {info.filename: z.read(info) for info in z.infolist()}


def write_members(path: Path, contents: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in contents.items():
            z.writestr(name, data)
    return path


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def tampered(tmp_path: Path, **changes: object) -> Path:
    """A saved small_trace with some arrays replaced (numpy arrays) or meta fields changed."""
    saved = members(small_trace().save(tmp_path / "good.npz"))
    meta = json.loads(str(np.load(io.BytesIO(saved["meta.npy"]))))
    for name, value in changes.items():
        if isinstance(value, np.ndarray):
            saved[f"{name}.npy"] = npy(value)
        else:
            meta[name] = value
    saved["meta.npy"] = npy(np.asarray(json.dumps(meta)))
    return write_members(tmp_path / "bad.npz", saved)


def load_fails_fast(path: Path, message: str, **kwargs: object) -> None:
    started = time.perf_counter()
    with pytest.raises(ValueError, match=message):
        Trace.load(path, **kwargs)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("changes, message", [
    ({"region": np.array([0, -5], np.int32)}, r"region: expected values in \[0, 65535\], got -5"),
    ({"region": np.array([0, 2**31 - 1], np.int32)}, r"region: expected values in \[0, 65535\], got 2147483647"),
    ({"unit": np.array([0, 2], np.int32)}, r"unit: expected values in \[0, 1\], got 2"),
    ({"units_per_block": 2**31 - 1}, r"meta.units_per_block: expected an int in \[1, 32\], got 2147483647"),
    ({"units_per_block": "2"}, r"meta.units_per_block: expected int, got str"),
    ({"region_names": ["x"] * (MAX_REGIONS + 1)}, r"meta.region_names: expected at most 65536 strings"),
    ({"capacity": -1}, r"meta.capacity: expected an int in \[0, 2147483647\], got -1"),
    ({"start_ns": np.zeros(3)}, r"sm: expected shape \(3,\) like start_ns \(1-D\), got \(2,\)"),
    ({"dropped_per_unit": np.zeros(5, np.int64)}, r"dropped_per_unit: expected 2 blocks x 2 units, got 5 entries"),
    ({"block_sm": np.zeros(2, np.float64)}, r"block_sm: expected integers, got float64"),
    ({"surprise": 1}, r"meta: expected the fields"),
])
def test_a_saved_field_out_of_its_range_is_refused(tmp_path, changes, message):
    load_fails_fast(tampered(tmp_path, **changes), message)


def test_deeply_nested_metadata_is_refused(tmp_path):
    saved = members(small_trace().save(tmp_path / "good.npz"))
    saved["meta.npy"] = npy(np.asarray("[" * 200_000 + "]" * 200_000))
    load_fails_fast(write_members(tmp_path / "deep.npz", saved), r"meta: expected the JSON .*RecursionError")


def _claim_size(path: Path, member: str, size: int) -> None:
    """Make the zip's central directory say `member` inflates to `size` bytes (what a bomb says)."""
    data = bytearray(path.read_bytes())
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) >= 0:
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46: at + 46 + name_length].decode() == member:
            struct.pack_into("<I", data, at + 24, size)
        at += 4
    path.write_bytes(bytes(data))


def test_a_member_that_would_inflate_to_gigabytes_is_refused_unread(tmp_path):
    path = small_trace().save(tmp_path / "bomb.npz")
    _claim_size(path, "start_ns.npy", 0xF000_0000)
    _claim_size(path, "end_ns.npy", 0xF000_0000)
    load_fails_fast(path, r"expected at most 4294967296 bytes once inflated, got \d+ \((start|end)_ns.npy alone "
                          r"4026531840\); pass max_bytes=")


def test_real_sizes_count_against_max_bytes(tmp_path):
    n = 20_000
    trace = Trace(sm=np.zeros(n), block=np.zeros(n), unit=np.zeros(n), region=np.zeros(n), start_ns=np.zeros(n),
                  end_ns=np.zeros(n), depth=np.zeros(n), region_names=("a",), unit_kind="warp", units_per_block=1,
                  block_ids=[0], block_sm=[0], block_start_ns=[0.0], block_end_ns=[1.0])
    path = trace.save(tmp_path / "zeros.npz")
    assert path.stat().st_size < 10_000  # zeros compress: only the inflated size tells
    load_fails_fast(path, "expected at most 100000 bytes once inflated", max_bytes=100_000)
    assert Trace.load(path).num_events == n


def test_a_header_declaring_a_huge_shape_is_refused(tmp_path):
    saved = members(small_trace().save(tmp_path / "good.npz"))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    saved["start_ns.npy"] = header.getvalue() + b"\0" * 16
    load_fails_fast(write_members(tmp_path / "huge.npz", saved),
                    r"start_ns.npy: its header declares \(1000000000000,\) float64 \(8000000000000 bytes\)")


@pytest.mark.parametrize("content", [b"\n\x0bperfetto-ish protobuf", b"region,start\n1,2\n", b""])
def test_a_file_that_is_not_a_zip_is_refused_before_numpy_reads_it(tmp_path, content):
    path = tmp_path / "trace.pftrace"
    path.write_bytes(content)
    load_fails_fast(path, r"expected an .npz file \(a zip archive, starting with b'PK\\x03\\x04'\)")


def _spec(units: int = 1, capacity: int = 2) -> ProfilerSpec:
    return ProfilerSpec(region_names=("a",), unit="warpgroup", units_per_block=units, capacity=capacity,
                        words_per_block=fmt.words_per_block(units, capacity), smem_offset=0)


@pytest.mark.parametrize("region", [2**31 - 1, MAX_REGIONS])
def test_a_raw_buffer_region_id_past_the_declared_range_is_refused(region):
    spec = _spec()
    row = np.zeros(spec.words_per_block, np.uint32)
    row[0], row[3], row[5], row[7], row[9] = fmt.MAGIC, 1, 1, 2, 10
    row[16] = 2
    row[18:22] = [fmt.BEGIN_BIT | region, 1, region, 5]
    started = time.perf_counter()
    with pytest.raises(ValueError, match=rf"block 0 unit 0: region id: expected an int in \[0, 65535\], "
                                         rf"got {region}; 2 events have such ids"):
        decode_buffer(row, spec)
    assert time.perf_counter() - started < 1.0


def test_a_spec_with_an_impossible_unit_count_is_refused_before_allocating():
    spec = ProfilerSpec(region_names=("a",), unit="warp", units_per_block=2**31 - 1, capacity=2**30 - 1,
                        words_per_block=fmt.words_per_block(2**31 - 1, 2**30 - 1), smem_offset=0)
    with pytest.raises(ValueError, match=r"ProfilerSpec.units_per_block: expected an int in \[1, 32\]"):
        decode_buffer(np.zeros(16, np.uint32), spec)


def test_a_good_trace_still_round_trips(tmp_path):
    trace = small_trace()
    loaded = Trace.load(trace.save(tmp_path / "t.npz"))
    assert [e.name for e in loaded.events()] == ["load", "mma"] and loaded.units_per_block == 2
    np.testing.assert_array_equal(loaded.start_ns, trace.start_ns)


@pytest.mark.parametrize("region, unit, message", [
    (-5, 0, r"Trace: region: expected values in \[0, 65535\], got -5"),
    (2**31 - 1, 0, r"Trace: region: expected values in \[0, 65535\], got 2147483647"),
    (0, 7, r"Trace: unit: expected values in \[0, 1\], got 7"),
])
def test_a_trace_built_by_hand_is_bounded_like_a_loaded_one(region, unit, message):
    """The viewers allocate per region id and unit: a hand-made trace with a huge id fails at
    construction, at once, instead of in the notebook's memory."""
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=message):
        Trace(sm=[0], block=[0], unit=[unit], region=[region], start_ns=[0.0], end_ns=[1.0], depth=[0],
              region_names=["a"], unit_kind="warpgroup", units_per_block=2, block_ids=np.array([0]),
              block_sm=np.array([0]), block_start_ns=np.array([0.0]), block_end_ns=np.array([1.0]))
    assert time.perf_counter() - t0 < 1.0
