"""A model's `torch.nn.Linear` layers on the library GEMM: `route_linears(model)`.

    from mgpu_lab.kernels.gemm import route_linears
    router = route_linears(model)     # every bf16 / fp16 nn.Linear now calls our GEMM
    logits = model(ids)               # the first call of each (m, n, k) builds its kernel
    router.unroute()                  # the model's own forwards again

Each routed Linear's forward calls, per input shape (..., k), the GEMM of its (m, n, k) as a
torch op (`make_gemm(m, n, k, transpose_b=True)`: the layer's weight, (n, k) = (out_features,
in_features), is B; a bias is added in the epilogue), made once per shape and process. The op
runs over the input's own shape (`TorchOp.reshaped`), so an eager call costs no `view` on either
side; under torch.compile, CUDA graphs and autograd-free inference it is the same op. A call the
GEMM cannot take (a dtype it has no kernel for, dtypes that differ, an empty input, a weight that
is not contiguous) goes to `F.linear` and is counted in `fallback_calls` with its reason.

`LinearRouter` takes any factory `(m, n, k, has_bias, dtype) -> op`, e.g. torch's own F.linear behind the
same router (what the HF benchmark's control prices). torch is imported only when routing.
"""

from __future__ import annotations

import functools
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .tiling import _INPUT_DTYPES

GemmOp = Callable[..., Any]  # op(x (m, k), weight (n, k)[, bias (n,)]) -> (m, n)
GemmFactory = Callable[[int, int, int, bool, str], GemmOp]  # (m, n, k, has_bias, dtype name) -> op
OP_NAMESPACE = "mgpu_lab_linear"
ROUTED_DTYPES = _INPUT_DTYPES  # the dtypes the GEMM has kernels for; torch names them alike


@dataclass
class LinearRouter:
    """Swaps the forward of every nn.Linear of a model for one that calls `factory`'s GEMM ops.

    `ops` holds one op per (m, n, k, has_bias, dtype), `build_s` the seconds the factory took for it
    (in order of first use), `fallback_calls` the calls that went to F.linear, by reason,
    `routed_calls` those that went to an op."""

    factory: GemmFactory
    ops: dict[tuple[int, int, int, bool, str], GemmOp] = field(default_factory=dict)
    build_s: dict[tuple[int, int, int, bool, str], float] = field(default_factory=dict)
    fallback_calls: Counter = field(default_factory=Counter)
    routed_calls: int = 0
    dtypes: tuple[str, ...] = ROUTED_DTYPES
    _routed: list[Any] = field(default_factory=list, repr=False)

    def op_for(self, m: int, n: int, k: int, has_bias: bool, dtype: str = "bfloat16") -> GemmOp:
        """The op of one shape and dtype (torch's name without "torch."), made (and timed) on
        first use."""
        key = (m, n, k, has_bias, dtype)
        if key not in self.ops:
            t0 = time.perf_counter()
            self.ops[key] = self.factory(m, n, k, has_bias, dtype)
            self.build_s[key] = time.perf_counter() - t0
        return self.ops[key]

    def forward(self, linear: Any, x: Any) -> Any:
        """What a routed Linear computes, F.linear(x, weight, bias), through the GEMM op where it
        can (a strided input made contiguous first), else F.linear itself, counted."""
        import torch.nn.functional as F

        weight, bias = linear.weight, linear.bias
        n, k = weight.shape
        reason = self._unroutable(x, weight, bias)
        if reason:
            self.fallback_calls[reason] += 1
            return F.linear(x, weight, bias)
        x2 = x.reshape(-1, k)
        if not x2.is_contiguous():  # e.g. the last position's hidden states sliced out of a batch
            x2 = x2.contiguous()
        op = self.op_for(x2.shape[0], n, k, bias is not None, _dtype_name(weight.dtype))
        self.routed_calls += 1
        y = op(x2, weight) if bias is None else op(x2, weight, bias)
        return y.reshape(*x.shape[:-1], n)

    def _unroutable(self, x: Any, weight: Any, bias: Any) -> str | None:
        """Why this call cannot go to the GEMM (None: it can)."""
        if x.dtype != weight.dtype or (bias is not None and bias.dtype != weight.dtype):
            return f"dtypes differ: x {x.dtype}, weight {weight.dtype}"
        if _dtype_name(weight.dtype) not in self.dtypes:
            return f"no kernel for {weight.dtype}"
        if x.numel() == 0:
            return "empty input"
        if not weight.is_contiguous():
            return "weight not contiguous"
        return None

    def route(self, model: Any) -> int:
        """Route every nn.Linear of `model` (an instance attribute shadows the class's forward;
        a module already given a forward of its own is left alone); returns how many were routed."""
        import torch

        count = 0
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and "forward" not in vars(module):
                module.forward = self._fast_forward(module)
                self._routed.append(module)
                count += 1
        return count

    def _fast_forward(self, linear: Any) -> Callable[[Any], Any]:
        """`forward(linear, x)` for one Linear with what it can hold between calls held: its
        parameter dict (read per call, so a replaced weight is seen, without nn.Module's Python
        __getattr__) and, per input shape, a call of that shape. An op with `reshaped` (our
        TorchOp) runs on the (..., k) input and returns the (..., n) output as they are; any
        other op gets the input viewed as (m, k) and its output viewed back. Anything unusual (a
        dtype that differs or has no kernel, an empty or strided input, a strided weight) takes
        `forward`, which explains or falls back."""
        params, calls, dtypes = linear._parameters, {}, self.dtypes
        general = functools.partial(self.forward, linear)

        def forward(x: Any) -> Any:
            weight, bias = params["weight"], params["bias"]
            dtype = weight.dtype
            if x.dtype is not dtype or (bias is not None and bias.dtype is not dtype) or not x.is_contiguous() \
                    or not weight.is_contiguous():
                return general(x)
            key = (x.shape, weight.shape, bias is None, dtype)  # a replaced weight of another shape: another op
            call = calls.get(key)
            if call is None:
                # never cached: an empty input's shape, or a dtype without a kernel, always comes here
                name = _dtype_name(dtype)
                if not x.numel() or name not in dtypes:
                    return general(x)
                call = calls[key] = self._shaped_call(tuple(x.shape), weight.shape, bias is not None, name)
            self.routed_calls += 1
            return call(x, weight) if bias is None else call(x, weight, bias)

        return forward

    def _shaped_call(self, x_shape: tuple, weight_shape: Any, has_bias: bool, dtype: str) -> GemmOp:
        """The call of one input shape (..., k): the op of its (m, n, k), over the input's own shape
        where the op can be (`reshaped`), else between two views."""
        n, k = weight_shape
        m = math.prod(x_shape[:-1])
        op = self.op_for(m, n, k, has_bias, dtype)
        out_shape = (*x_shape[:-1], n)
        reshaped = getattr(op, "reshaped", None)
        if reshaped is not None:
            return reshaped([x_shape, (n, k)] + ([(n,)] if has_bias else []), [out_shape])

        def viewed(x: Any, *weights: Any) -> Any:
            return op(x.view(m, k), *weights).view(out_shape)

        return viewed

    def unroute(self) -> None:
        """Give every routed Linear its own forward back."""
        for module in self._routed:
            del module.forward
        self._routed.clear()

    def shapes_built(self) -> dict[str, float]:
        """Build seconds per shape, keyed `MxNxK` (`_bias` where the op takes a bias, `_float16`
        where it is not bf16)."""
        return {f"{m}x{n}x{k}{'_bias' if bias else ''}{'' if dtype == 'bfloat16' else '_' + dtype}": s
                for (m, n, k, bias, dtype), s in self.build_s.items()}


def _dtype_name(dtype: Any) -> str:
    """torch.bfloat16 -> "bfloat16"."""
    return str(dtype).removeprefix("torch.")


def op_name(m: int, n: int, k: int, has_bias: bool, tune: str | None = None, dtype: str = "bfloat16") -> str:
    """The torch op's qualified name of one shape: valid identifiers, unique per (m, n, k, bias,
    tune, dtype)."""
    kind = "" if dtype == "bfloat16" else f"{dtype}_"
    return f"{OP_NAMESPACE}::linear_{kind}{'bias_' if has_bias else ''}{'tuned_' if tune else ''}{m}x{n}x{k}"


@functools.cache
def gemm_linear_op(m: int, n: int, k: int, has_bias: bool, dtype: str = "bfloat16",
                   tune: str | None = None) -> GemmOp:
    """Our GEMM x (m, k) @ W.T for W (n, k) (+ bias (n,) in the epilogue), in `dtype`, as a torch
    op; one per shape for the process, since torch cannot register an op name twice. tune="auto":
    make_gemm's tune="auto" (the model's top few and its pick's cluster twin timed once, the
    fastest kept)."""
    from .epilogues import fused
    from .kernel import make_gemm

    name = op_name(m, n, k, has_bias, tune, dtype)
    if not has_bias:
        return make_gemm(m, n, k, transpose_b=True, dtype=dtype, out_dtype=dtype, tune=tune).as_torch_op(name)
    epilogue = fused(m, n, bias=dtype)
    kernel = make_gemm(m, n, k, transpose_b=True, dtype=dtype, out_dtype=dtype, epilogue=epilogue.fn,
                       epilogue_inputs=epilogue.inputs, tune=tune)
    return kernel.as_torch_op(name)


def route_linears(model: Any, tune: str | None = None) -> LinearRouter:
    """Route every bf16 / fp16 `nn.Linear` of `model` to the library GEMM (one torch op per input
    shape and dtype, built on its first call; `tune="auto"` times the model's top few candidates
    once per shape); returns the router (`unroute()`, `routed_calls`, `fallback_calls`,
    `build_s`). Other Linears, and calls the GEMM cannot take, keep F.linear."""
    if tune not in (None, "auto"):
        raise ValueError(f"tune: expected None or 'auto', got {tune!r}")
    router = LinearRouter(functools.partial(gemm_linear_op, tune=tune))
    router.route(model)
    return router
