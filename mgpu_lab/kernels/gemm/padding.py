"""GEMMs whose rows TMA cannot address: copy the operands into padded buffers first.

TMA descriptors need row strides that are multiples of 16 bytes, so a bf16 A (m, k) needs k a
multiple of 8, and B (k, n) or C (m, n) need n a multiple of 8. `padded_gemm` builds the GEMM
for (m, round_up(n), round_up(k)), copies A, B and the epilogue's (n,) / (m, n) arrays into
zero-padded buffers (zeros in the K padding add nothing) and copies C's first n columns out.
The copies cost a pass over the operands; aligned shapes never come here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from mgpu_lab import dsl
from mgpu_lab.compiler.compiled_kernel import dtype_itemsize
from mgpu_lab.runtime.kernel import Kernel
from mgpu_lab.runtime.program import padded

from .pieces import round_up, rows_aligned


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


def padded_gemm(make: Callable[..., Any], m: int, n: int, k: int, *, transpose_b: bool, dtype: str,
                out_dtype: str, epilogue_inputs: Sequence[Any] = (), **kwargs: Any) -> Any:
    """`make_gemm`'s (or an FP8 maker's) Kernel for shapes with unaligned rows (see the module
    doc): `make` builds the GEMM for (m, round_up(n), round_up(k)) and the program around it
    copies A, B and the epilogue's (n,) / (m, n) arrays into zero-filled scratch buffers of the
    padded shapes first and C's first n columns out last. Called as any GEMM:
    `kernel(a, b, *epilogue_arrays)`."""
    isz, osz = dtype_itemsize(dtype), dtype_itemsize(out_dtype)
    k_pad = round_up(k, 16 // isz)
    n_pad = round_up(n, 16 // (osz if transpose_b else min(isz, osz)))

    def padded_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
        return (n_pad,) if shape == (n,) else (m, n_pad) if shape == (m, n) else shape

    def unpadded_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
        return (n,) if shape == (n_pad,) else (m, n) if shape == (m, n_pad) else shape

    specs = [(s.shape, s.dtype) if hasattr(s, "shape") else s for s in epilogue_inputs]
    inner = make(m, n_pad, k_pad, transpose_b=transpose_b, dtype=dtype, out_dtype=out_dtype,
                 epilogue_inputs=[dsl.ShapeDtype(padded_shape(tuple(shape)), d) for shape, d in specs], **kwargs)
    program = inner.program
    a_shape, b_shape = (m, k), ((n, k) if transpose_b else (k, n))
    user_inputs = [dataclasses.replace(program.inputs[0], shape=a_shape),
                   dataclasses.replace(program.inputs[1], shape=b_shape)]
    # every array after a and b (the maker's own, e.g. fp8 scales, then the epilogue's)
    user_inputs += [dataclasses.replace(s, shape=unpadded_shape(tuple(s.shape))) for s in program.inputs[2:]]
    user_outputs = [dataclasses.replace(program.outputs[0], shape=(m, n))]
    name = f"{program.name}_padded_{m}x{n}x{k}"
    return Kernel(padded(program, tuple(user_inputs), tuple(user_outputs), name=name), isolate=inner.isolate)
