"""Fused GEMM epilogues: what `make_gemm(..., epilogue=f, epilogue_inputs=...)` runs on each
f32 accumulator tile in registers before it is rounded and stored.

An epilogue is `f(acc, tile, *refs) -> FragmentedArray`: `acc` is the consumer's f32 tile
(WGMMA layout), `tile` an `EpilogueTile` that loads matching register tiles of the extra
arrays `refs` (`tile.columns(bias)`, `tile.rows(v)`, `tile.load(residual)`, `tile.scalar(s)`).
relu(A @ B + bias) is

    def bias_relu(acc, tile, bias):
        return (acc + tile.columns(bias)).max(0.0)

    kern = make_gemm(m, n, k, epilogue=bias_relu, epilogue_inputs=[((n,), "bfloat16")])
    c = kern(a, b, bias)

`fused(...)` builds the common combination C = activation(scale * A @ B + bias) + residual.

An epilogue that reads its arrays only through the tile's loaders and is elementwise otherwise
gives the same C on C.T's tiles (swap_ab: the loaders speak C's terms either way); marked
`swap_safe = True` (as `fused`'s are), the configuration may swap A and B for it, as it does
for few rows without an epilogue. `bias_relu.swap_safe = True` above would be right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from mgpu_lab import dsl
from mgpu_lab.user_errors import user_facing

from .pieces import EpilogueTile

LOG2E = 1.4426950408889634
GELU_C = 0.7978845608028654  # sqrt(2 / pi)
ACTIVATIONS = ("relu", "gelu", "silu")


def relu(x: dsl.FragmentedArray) -> dsl.FragmentedArray:
    return x.max(0.0)


def gelu(x: dsl.FragmentedArray) -> dsl.FragmentedArray:
    """GELU, tanh approximation (torch's approximate='tanh'): 0.5 x (1 + tanh(c (x + 0.044715 x^3))),
    tanh(u) = 1 - 2 / (2^(2u log2 e) + 1) on the MUFU exp2."""
    u = (x + x * x * x * 0.044715) * GELU_C
    tanh = 1.0 - 2.0 * reciprocal((u * (2.0 * LOG2E)).exp2() + 1.0)
    return x * (tanh + 1.0) * 0.5


def silu(x: dsl.FragmentedArray) -> dsl.FragmentedArray:
    """x * sigmoid(x) = x / (1 + 2^(-x log2 e))."""
    return x * reciprocal((x * -LOG2E).exp2() + 1.0)


def reciprocal(x: dsl.FragmentedArray) -> dsl.FragmentedArray:
    """1 / x with the approximate division (MUFU.RCP, ~1 ulp): the IEEE division is a
    subroutine call whose saved registers spill in a 128-register accumulator loop."""
    approx = dsl.ir.Attribute.parse("#arith.fastmath<afn>")
    one = dsl.vector.broadcast(x.registers[0].type, dsl.c(1.0, x.element_type))
    return dsl.FragmentedArray([dsl.arith.divf(one, r, fastmath=approx) for r in x.registers], x.layout)


_BY_NAME: dict[str, Callable[[dsl.FragmentedArray], dsl.FragmentedArray]] = {"relu": relu, "gelu": gelu,
                                                                             "silu": silu}


@dataclass(frozen=True)
class FusedEpilogue:
    """C = activation(scale * A @ B + bias) + residual: pass `epilogue=self` (or `self.fn`),
    `epilogue_inputs=self.inputs` to make_gemm and the arrays in `self.names` order after a and b."""

    fn: Callable[..., dsl.FragmentedArray]
    inputs: tuple[dsl.ShapeDtype, ...]
    names: tuple[str, ...]
    swap_safe = True  # elementwise, its arrays read through the tile's loaders: C.T's tiles give the same C

    def __call__(self, acc: dsl.FragmentedArray, tile: Any, *refs: Any) -> dsl.FragmentedArray:
        return self.fn(acc, tile, *refs)


@user_facing
def fused(m: int, n: int, *, bias: str | None = None, activation: str | None = None, residual: str | None = None,
          scale: bool = False) -> FusedEpilogue:
    """bias / residual: the dtype of a (n,) bias / (m, n) residual array (None: none); activation:
    'relu', 'gelu' (tanh) or 'silu'; scale: a (1,) float32 array multiplies the product first."""
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"fused: activation must be one of {ACTIVATIONS} or None, got {activation!r}")
    names, inputs = [], []
    if scale:
        names.append("scale"), inputs.append(dsl.ShapeDtype((1,), "float32"))
    if bias is not None:
        names.append("bias"), inputs.append(dsl.ShapeDtype((n,), bias))
    if residual is not None:
        names.append("residual"), inputs.append(dsl.ShapeDtype((m, n), residual))
    act = _BY_NAME.get(activation) if activation else None

    def epilogue(acc: dsl.FragmentedArray, tile: EpilogueTile, *refs: Any) -> dsl.FragmentedArray:
        arrays = dict(zip(names, refs))
        if "scale" in arrays:
            acc = acc * tile.scalar(arrays["scale"])
        if "bias" in arrays:
            acc = acc + tile.columns(arrays["bias"])
        if act is not None:
            acc = act(acc)
        if "residual" in arrays:
            acc = acc + tile.load(arrays["residual"])
        return acc

    epilogue.swap_safe = True
    return FusedEpilogue(epilogue, tuple(inputs), tuple(names))


def reference_fused(product: np.ndarray, *, bias: np.ndarray | None = None, activation: str | None = None,
                    residual: np.ndarray | None = None, scale: float | None = None) -> np.ndarray:
    """The float64 reference of `fused` applied to a (float32) product."""
    x = product.astype(np.float64)
    if scale is not None:
        x = x * scale
    if bias is not None:
        x = x + bias.astype(np.float64)[None, :]
    if activation == "relu":
        x = np.maximum(x, 0.0)
    elif activation == "gelu":
        x = 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x ** 3)))
    elif activation == "silu":
        x = x / (1.0 + np.exp(-x))
    if residual is not None:
        x = x + residual.astype(np.float64)
    return x
