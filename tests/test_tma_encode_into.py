"""TMA descriptors written straight into a launch's parameter slots (`TmaEncoder.encode_into`), with
libcuda's cuTensorMapEncodeTiled replaced by a stand-in that writes like the driver does: what a
launch passes, what the descriptor cache saves, and what a refused or misaligned address does."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("cupy")
pytest.importorskip("cuda.bindings")

from mgpu_lab.runtime import tma_descriptor  # noqa: E402
from mgpu_lab.runtime.portable import PortableLauncher  # noqa: E402

SPECS = [{"array": a, "dtype": "bfloat16", "global_shape": [2048, rows], "global_strides_bytes": [4096],
          "box_shape": [64, 64], "swizzle": 128} for a, rows in ((0, 64), (1, 2048), (2, 64))]
KERNEL = {"name": "k", "grid": [132, 1, 1], "block": [384, 1, 1], "cluster": [1, 1, 1], "dynamic_smem": 0,
          "inputs": [([64, 2048], "bfloat16"), ([2048, 2048], "bfloat16")], "outputs": [([64, 2048], "bfloat16")],
          "params": [("tma", 0), ("tma", 1), ("tma", 2), ("array", 2)], "cubin": b"", "profile_words": None}


def _words(ptr: int, rows: int) -> list[int]:
    return [ptr + 1000 * i + rows for i in range(16)]


@pytest.fixture
def driver_encodes(monkeypatch):
    """A stand-in for libcuda's encode, called as ctypes would call it (c_void_p addresses, ctypes
    arrays, ints): writes `_words(ptr, rows)` at the address; refuses pointers in `refuse`."""
    calls, refuse = [], set()

    def encode(address, dtype, rank, ptr, shape, strides, box, elem, interleave, swizzle, l2, oob):
        assert isinstance(address, ctypes.c_void_p) and isinstance(ptr, ctypes.c_void_p)
        assert address.value % 64 == 0, "CUtensorMap must be 64-byte aligned"
        assert (rank, list(box), list(elem)) == (2, [64, 64], [1, 1]) and all(isinstance(x, int) for x in
                                                                            (dtype, interleave, swizzle, l2, oob))
        calls.append(ptr.value)
        if ptr.value in refuse:
            return 1  # CUDA_ERROR_INVALID_VALUE
        (ctypes.c_uint64 * 16).from_address(address.value)[:] = _words(ptr.value, shape[1])
        return 0

    def declared(address, dtype, rank, ptr, shape, *rest):  # the check's reference call: writes the same
        (ctypes.c_uint64 * 16).from_address(address.value)[:] = _words(ptr.value, shape[1])
        return 0

    monkeypatch.setattr(tma_descriptor, "_libcuda_encode_tiled", lambda: encode)
    monkeypatch.setattr(tma_descriptor, "_declared_encode_tiled", lambda: declared)
    monkeypatch.setattr(tma_descriptor, "_DIRECT_CHECK", tma_descriptor._DirectCheck())
    return SimpleNamespace(calls=calls, refuse=refuse)


def _launcher():
    encoder = tma_descriptor.TmaEncoder.from_dicts(SPECS)
    launcher = PortableLauncher(KERNEL, tma_encoder=encoder)
    launched = []

    def launch(stream, argv):
        slots = (ctypes.c_uint64 * 4).from_address(argv)
        launched.append([list((ctypes.c_uint64 * 16).from_address(slots[i])) for i in range(3)]
                        + [ctypes.c_uint64.from_address(slots[3]).value])

    launcher._functions[0] = SimpleNamespace(launch=launch)
    return launcher, launched


def test_descriptors_are_written_into_the_launch_slots_and_cached_per_address(driver_encodes):
    launcher, launched = _launcher()
    a, w, c = 0x7000_0000, 0x7100_0000, 0x7200_0000
    launcher.launch_pointers([a, w, c], 0, 0)
    assert launched[-1] == [_words(a, 64), _words(w, 2048), _words(c, 64), c]
    assert driver_encodes.calls == [a, w, c]
    # A decode step: the activation and output move, the weight stays: only they are encoded;
    # the weight's cached words are copied into the new block's slot.
    a2, c2 = a + 0x10000, c + 0x10000
    launcher.launch_pointers([a2, w, c2], 0, 0)
    assert launched[-1] == [_words(a2, 64), _words(w, 2048), _words(c2, 64), c2]
    assert driver_encodes.calls == [a, w, c, a2, c2]
    # Every block stays exact when blocks are recycled and descriptors come from the cache.
    for i in range(40):
        a3, c3 = a + 0x100 * (i % 7), c + 0x100 * (i % 5)
        launcher.launch_pointers([a3, w, c3], 0, 0)
        assert launched[-1] == [_words(a3, 64), _words(w, 2048), _words(c3, 64), c3]
    assert sorted(set(driver_encodes.calls)) == sorted(driver_encodes.calls), "an address encoded twice"


def test_encode_returns_the_words_it_writes(driver_encodes):
    encoder = tma_descriptor.TmaEncoder.from_dicts(SPECS)
    got = encoder.encode(1, [0x1000, 0x2000, 0x3000])
    assert got.dtype == np.uint64 and got.tolist() == _words(0x2000, 2048)
    assert encoder.encode(1, [0, 0x2000, 0]).tolist() == _words(0x2000, 2048) and driver_encodes.calls == [0x2000]


def test_a_refused_encode_is_explained_and_leaves_no_block(driver_encodes, monkeypatch):
    from cuda.bindings import driver

    driver_encodes.refuse.add(0x9000_0000)
    monkeypatch.setattr(driver, "cuTensorMapEncodeTiled",
                        lambda *args: (driver.CUresult.CUDA_ERROR_INVALID_VALUE, None))
    monkeypatch.setattr(driver, "cuGetErrorName", lambda err: (driver.CUresult.CUDA_SUCCESS, err.name.encode()))
    launcher, launched = _launcher()
    with pytest.raises(ValueError, match=r"cuTensorMapEncodeTiled failed \(CUDA_ERROR_INVALID_VALUE\) for array 2"):
        launcher.launch_pointers([0x7000_0000, 0x7100_0000, 0x9000_0000], 0, 0)
    assert launched == [] and not launcher._storage.filled
    with pytest.raises(ValueError, match="array 0: TMA needs a 16-byte aligned base address, got 0x70000008"):
        launcher.launch_pointers([0x7000_0008, 0x7100_0000, 0x7200_0000], 0, 0)
    assert 0x7000_0008 not in driver_encodes.calls and launched == [] and not launcher._storage.filled


@pytest.mark.parametrize("case", ["agrees", "differs", "refuses"])
def test_the_direct_encode_is_used_only_where_it_writes_what_the_declared_call_writes(driver_encodes, monkeypatch,
                                                                                      case):
    """libcuda's encode called by ctypes without declared argument types is an assumption about
    the calling convention: the process's first direct encode (a real address) is repeated with
    the argument types declared; where the words differ or that call fails, that encode and every
    later one go through cuda-bindings, with a RuntimeWarning."""
    from cuda.bindings import driver

    def declared(address, dtype, rank, ptr, shape, *rest):
        if case == "refuses":
            return 1
        words = _words(ptr.value, shape[1]) if case == "agrees" else [7] * 16
        (ctypes.c_uint64 * 16).from_address(address.value)[:] = words
        return 0

    bindings = []

    def bindings_encode(dtype, rank, ptr, shape, *rest):
        bindings.append(ptr)
        return driver.CUresult.CUDA_SUCCESS, SimpleNamespace(opaque=_words(ptr, int(shape[1])))

    monkeypatch.setattr(tma_descriptor, "_declared_encode_tiled", lambda: declared)
    monkeypatch.setattr(driver, "cuTensorMapEncodeTiled", bindings_encode)
    launcher, launched = _launcher()
    a, w, c = 0x7000_0000, 0x7100_0000, 0x7200_0000
    if case == "agrees":
        launcher.launch_pointers([a, w, c], 0, 0)
        assert driver_encodes.calls == [a, w, c] and bindings == []
    else:
        with pytest.warns(RuntimeWarning, match="encoding through cuda-bindings from now on"):
            launcher.launch_pointers([a, w, c], 0, 0)
        assert driver_encodes.calls == [a] and bindings == [a, w, c]  # the first checked, then none direct
        launcher.launch_pointers([a + 0x100, w, c + 0x100], 0, 0)
        assert driver_encodes.calls == [a] and bindings == [a, w, c, a + 0x100, c + 0x100]
    assert launched[0] == [_words(a, 64), _words(w, 2048), _words(c, 64), c]
    assert tma_descriptor._DIRECT_CHECK.checked and tma_descriptor._DIRECT_CHECK.ok == (case == "agrees")
    assert tma_descriptor.encode_path() == ("direct" if case == "agrees" else "cuda-bindings")


def test_records_name_the_encode_path(driver_encodes, tmp_path):
    """Benchmark records say how descriptors were encoded when they were written (the H100 runs
    of 2026-12-08 went through cuda-bindings unseen)."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from common import write_record

    before = json.loads(write_record("encode_path_probe", {}, out_dir=tmp_path).read_text())
    assert before["tma_encode_path"] == "not yet"
    launcher, _ = _launcher()
    launcher.launch_pointers([0x7000_0000, 0x7100_0000, 0x7200_0000], 0, 0)
    after = json.loads(write_record("encode_path_probe", {}, out_dir=tmp_path).read_text())
    assert after["tma_encode_path"] == "direct"
