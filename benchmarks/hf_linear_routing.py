"""Route every `torch.nn.Linear` of a model to a GEMM given as a factory of torch ops.

    router = LinearRouter(our_gemm_op)      # or any (m, n, k, has_bias) -> op factory
    routed = router.route(model)            # how many Linears now call the GEMM
    ...
    router.unroute()                        # the model's own forwards again

Each routed Linear's forward flattens its input to 2-D (tokens, in_features), calls the op of
that (m, n, k) (made once per shape by the factory, and timed: the first forward of a new shape
builds a kernel), and restores the leading dimensions. The Linear's own weight, (n, k) =
(out_features, in_features), is the GEMM's B (transpose_b=True: C = A @ B.T, what F.linear
computes), its bias the epilogue's. A call the GEMM cannot take (dtypes that differ, an empty
input) goes to F.linear and is counted, so a benchmark can say what was not routed.

Only torch is imported, and only when routing: the benchmark scripts import without it.
"""

from __future__ import annotations

import functools
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

GemmOp = Callable[..., Any]  # op(x (m, k), weight (n, k)[, bias (n,)]) -> (m, n)
GemmFactory = Callable[[int, int, int, bool], GemmOp]  # (m, n, k, has_bias) -> op
OP_NAMESPACE = "mgpu_hf_bench"


@dataclass
class LinearRouter:
    """Swaps the forward of every nn.Linear of a model for one that calls `factory`'s GEMM ops.

    `ops` holds one op per (m, n, k, has_bias), `build_s` the seconds the factory took for it
    (in order of first use), `fallback_calls` the calls that went to F.linear, by reason."""

    factory: GemmFactory
    ops: dict[tuple[int, int, int, bool], GemmOp] = field(default_factory=dict)
    build_s: dict[tuple[int, int, int, bool], float] = field(default_factory=dict)
    fallback_calls: Counter = field(default_factory=Counter)
    routed_calls: int = 0
    _routed: list[Any] = field(default_factory=list, repr=False)

    def op_for(self, m: int, n: int, k: int, has_bias: bool) -> GemmOp:
        """The op of one shape, made (and timed) on first use."""
        key = (m, n, k, has_bias)
        if key not in self.ops:
            t0 = time.perf_counter()
            self.ops[key] = self.factory(m, n, k, has_bias)
            self.build_s[key] = time.perf_counter() - t0
        return self.ops[key]

    def forward(self, linear: Any, x: Any) -> Any:
        """What a routed Linear computes: F.linear(x, weight, bias) through the GEMM op."""
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
        op = self.op_for(x2.shape[0], n, k, bias is not None)
        self.routed_calls += 1
        y = op(x2, weight) if bias is None else op(x2, weight, bias)
        return y.reshape(*x.shape[:-1], n)

    @staticmethod
    def _unroutable(x: Any, weight: Any, bias: Any) -> str | None:
        """Why this call cannot go to the GEMM (None: it can)."""
        if x.dtype != weight.dtype or (bias is not None and bias.dtype != weight.dtype):
            return f"dtypes differ: x {x.dtype}, weight {weight.dtype}"
        if x.numel() == 0:
            return "empty input"
        if not weight.is_contiguous():
            return "weight not contiguous"
        return None

    def route(self, model: Any) -> int:
        """Route every nn.Linear of `model` (an instance attribute shadows the class's forward);
        returns how many were routed."""
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
        dtype that differs, an empty or non-contiguous input, a non-contiguous weight) takes
        `forward`, which explains or falls back."""
        params, calls = linear._parameters, {}
        general = functools.partial(self.forward, linear)

        def forward(x: Any) -> Any:
            weight, bias = params["weight"], params["bias"]
            dtype = weight.dtype
            if x.dtype is not dtype or (bias is not None and bias.dtype is not dtype) or not x.is_contiguous() \
                    or not weight.is_contiguous():
                return general(x)
            key = (x.shape, weight.shape, bias is None)  # a replaced weight of another shape: another op
            call = calls.get(key)
            if call is None:
                if not x.numel():  # never cached: an empty input's shape always comes here
                    return general(x)
                call = calls[key] = self._shaped_call(tuple(x.shape), weight.shape, bias is not None)
            self.routed_calls += 1
            return call(x, weight) if bias is None else call(x, weight, bias)

        return forward

    def _shaped_call(self, x_shape: tuple, weight_shape: Any, has_bias: bool) -> GemmOp:
        """The call of one input shape (..., k): the op of its (m, n, k), over the input's own shape
        where the op can be (`reshaped`), else between two views."""
        n, k = weight_shape
        m = math.prod(x_shape[:-1])
        op = self.op_for(m, n, k, has_bias)
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
        """Build seconds per shape, keyed `MxNxK` (`_bias` where the op takes a bias)."""
        return {f"{m}x{n}x{k}{'_bias' if bias else ''}": s for (m, n, k, bias), s in self.build_s.items()}


def op_name(m: int, n: int, k: int, has_bias: bool, tune: str | None = None) -> str:
    """The torch op's qualified name of one shape: valid identifiers, unique per (m, n, k, bias,
    tune)."""
    return f"{OP_NAMESPACE}::linear_{'bias_' if has_bias else ''}{'tuned_' if tune else ''}{m}x{n}x{k}"


@functools.cache
def our_gemm_op(m: int, n: int, k: int, has_bias: bool, tune: str | None = None) -> GemmOp:
    """Our bf16 GEMM, x (m, k) @ W.T for W (n, k), as a torch op (the bias added in the epilogue);
    cached per shape for the process, since torch cannot register an op name twice. tune="auto":
    make_gemm's tune="auto" (the model's top few and its pick's cluster twin timed once, the
    fastest kept)."""
    from mgpu_lab.kernels.gemm import fused, make_gemm

    name = op_name(m, n, k, has_bias, tune)
    if not has_bias:
        return make_gemm(m, n, k, transpose_b=True, tune=tune).as_torch_op(name)
    epilogue = fused(m, n, bias="bfloat16")
    kernel = make_gemm(m, n, k, transpose_b=True, epilogue=epilogue.fn, epilogue_inputs=epilogue.inputs, tune=tune)
    return kernel.as_torch_op(name)
