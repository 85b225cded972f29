"""GEMMs whose rows TMA cannot address: copy the operands into padded buffers first.

TMA descriptors need row strides that are multiples of 16 bytes, so a bf16 A (m, k) needs k a
multiple of 8, and B (k, n) or C (m, n) need n a multiple of 8. `PaddedGemm` builds the GEMM
for (m, round_up(n), round_up(k)), copies A, B and the epilogue's (n,) / (m, n) arrays into
zero-padded buffers (zeros in the K padding add nothing) and copies C's first n columns out.
The copies cost a pass over the operands; aligned shapes never come here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from mgpu_lab.compiler.compiled_kernel import dtype_itemsize

from .gemm_pieces import round_up, rows_aligned


def aligned_shape(m: int, n: int, k: int, transpose_b: bool, dtype: str, out_dtype: str) -> bool:
    """Whether A, B and C of this problem all have rows that are multiples of 16 bytes."""
    del m
    try:
        isz, osz = dtype_itemsize(dtype), dtype_itemsize(out_dtype)
    except (KeyError, ValueError, TypeError):
        return True  # let the tiling checks name the bad dtype
    if not all(isinstance(x, int) and x > 0 for x in (n, k)):
        return True  # likewise for bad sizes
    return rows_aligned(k, isz) and rows_aligned(n, osz) and (transpose_b or rows_aligned(n, isz))


def _bits(array: Any) -> Any:
    """An unsigned-integer view of the same bytes (CuPy cannot copy bf16 / float8 directly)."""
    import cupy

    return array.view({1: cupy.uint8, 2: cupy.uint16, 4: cupy.uint32, 8: cupy.uint64}[array.dtype.itemsize])


class PaddedGemm:
    """`make_gemm`'s kernel for shapes with unaligned rows (see the module doc): call it as
    `kernel(a, b, *epilogue_arrays, out=None)`; `.inner` is the padded GEMM kernel."""

    def __init__(self, make: Callable[..., Any], m: int, n: int, k: int, *, transpose_b: bool, dtype: str,
                 out_dtype: str, epilogue_inputs: Sequence[Any] = (), **kwargs: Any):
        self.m, self.n, self.k, self.transpose_b = m, n, k, transpose_b
        isz, osz = dtype_itemsize(dtype), dtype_itemsize(out_dtype)
        self.k_pad = round_up(k, 16 // isz)
        self.n_pad = round_up(n, 16 // (osz if transpose_b else min(isz, osz)))
        padded = [self._padded_spec(spec) for spec in epilogue_inputs]
        self.inner = make(m, self.n_pad, self.k_pad, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                          epilogue_inputs=padded, **kwargs)
        # every array after a and b (the maker's own, e.g. fp8 scales, then the epilogue's)
        # (a stream-K kernel's own workspace and flags are not the caller's: its `inputs` leave them out)
        self.inner_inputs = tuple(getattr(self.inner, "inputs", self.inner.compiled.inputs))
        self.extra_shapes = [self._unpadded(tuple(spec.shape)) for spec in self.inner_inputs[2:]]

    def _padded_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        if shape == (self.n,):
            return (self.n_pad,)
        if shape == (self.m, self.n):
            return (self.m, self.n_pad)
        return shape

    def _padded_spec(self, spec: Any) -> Any:
        from mgpu_lab import dsl

        shape, dtype = (spec.shape, spec.dtype) if hasattr(spec, "shape") else spec
        return dsl.ShapeDtype(self._padded_shape(tuple(shape)), dtype)

    @property
    def compiled(self) -> Any:
        return self.inner.compiled

    @property
    def name(self) -> str:
        return self.inner.name

    def __repr__(self) -> str:
        return f"<PaddedGemm {self.m}x{self.n}x{self.k} via {self.inner!r}>"

    @staticmethod
    def _pad(array: Any, expected: tuple[int, ...], padded: tuple[int, ...], what: str) -> Any:
        """`array` (checked to have shape `expected`) zero-padded to `padded`."""
        import cupy

        if tuple(array.shape) != expected:
            raise ValueError(f"gemm: {what} must have shape {expected}, got {tuple(array.shape)}")
        if expected == padded:
            return array
        buffer = cupy.zeros(padded, _bits(array).dtype).view(array.dtype)
        _bits(buffer)[tuple(slice(0, w) for w in expected)] = _bits(array)
        return buffer

    def _unpadded(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The user's shape of an epilogue array the inner kernel takes padded."""
        if shape == (self.n_pad,):
            return (self.n,)
        if shape == (self.m, self.n_pad):
            return (self.m, self.n)
        return shape

    def __call__(self, a: Any, b: Any, *extras: Any, out: Any = None, stream: Any = None) -> Any:
        import cupy

        b_shape = (self.n, self.k) if self.transpose_b else (self.k, self.n)
        b_padded = (self.n_pad, self.k_pad) if self.transpose_b else (self.k_pad, self.n_pad)
        if len(extras) != len(self.extra_shapes):
            raise ValueError(f"gemm: expected {len(self.extra_shapes)} arrays after a and b (shapes "
                             f"{self.extra_shapes}), got {len(extras)}")
        with stream if stream is not None else contextlib.nullcontext():
            a_pad = self._pad(a, (self.m, self.k), (self.m, self.k_pad), "a")
            b_pad = self._pad(b, b_shape, b_padded, "b")
            extra_pad = [self._pad(x, want, tuple(spec.shape), f"array {i + 2} (after a and b)")
                         for i, (x, want, spec) in enumerate(zip(extras, self.extra_shapes,
                                                                 self.inner_inputs[2:]))]
            result = self.inner(a_pad, b_pad, *extra_pad)
            if out is None:
                out = cupy.empty((self.m, self.n), result.dtype)
            elif tuple(out.shape) != (self.m, self.n) or out.dtype != result.dtype:
                raise ValueError(f"gemm: out must be a ({self.m}, {self.n}) {result.dtype} array, got "
                                 f"{tuple(out.shape)} {out.dtype}")
            _bits(out)[...] = _bits(result)[:, : self.n]
        return out
