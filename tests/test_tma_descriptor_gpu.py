"""TMA descriptors encoded through libcuda directly (ctypes, written into a parameter slot) equal
cuda-bindings' encodes word for word."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def test_direct_encodes_equal_the_bindings_encodes():
    import cupy

    from mgpu_lab.kernels.gemm import make_gemm
    from mgpu_lab.runtime import tma_descriptor
    from mgpu_lab.runtime.tma_descriptor import TMA_DESCRIPTOR_WORDS, TmaEncoder, _libcuda_encode_tiled

    assert _libcuda_encode_tiled() is not None, "libcuda.so.1 should open on a GPU machine"
    kernels = [make_gemm(16, 6144, 4096, transpose_b=True), make_gemm(512, 768, 1024),
               make_gemm(4096, 4096, 4096, transpose_b=True)]
    for kernel in kernels:
        specs = kernel.compiled.tma_descriptors
        encoder = TmaEncoder(specs)
        assert encoder._direct is not None
        buffers = [cupy.empty(1 << 20, np.uint8) for _ in range(2)]
        slot = np.full(TMA_DESCRIPTOR_WORDS + 8, 0xDEAD, dtype=np.uint64)  # poisoned
        shift = (-slot.ctypes.data % 64) // 8
        words = slot[shift: shift + TMA_DESCRIPTOR_WORDS]
        for index in range(len(specs)):
            for buffer in buffers:
                ptr = buffer.data.ptr
                words[:] = 0xDEAD
                assert encoder._direct[index].into(ptr, words.ctypes.data) == 0
                np.testing.assert_array_equal(words, encoder._encode_with_bindings(index, ptr))
                # Through the launcher's path (a fresh encoder: no cached words) and from the cache.
                pointers = [ptr] * (max(s.array for s in specs) + 1)
                for fresh in (TmaEncoder(specs), encoder):
                    words[:] = 0xDEAD
                    fresh.encode_into(index, pointers, words.ctypes.data, memoryview(words).cast("B"))
                    np.testing.assert_array_equal(words, encoder._encode_with_bindings(index, ptr))
    # the process's first direct encode was checked against the declared call, and agreed
    assert tma_descriptor._DIRECT_CHECK.checked and tma_descriptor._DIRECT_CHECK.ok


def test_a_refused_encode_is_explained_by_the_bindings_path():
    from mgpu_lab.runtime.tma_descriptor import TmaEncoder

    spec = {"array": 0, "dtype": "bfloat16", "global_shape": [64, 64], "global_strides_bytes": [128],
            "box_shape": [64, 64], "swizzle": 128}
    encoder = TmaEncoder([spec])  # a 128-byte swizzle allows inner boxes of at most 128 bytes: 64 bf16 is fine
    with pytest.raises(ValueError, match="16-byte aligned base address"):
        encoder.encode(0, [0x1008])
