"""A transformer MLP block whose two matmuls are our Hopper GEMM, as a torch module.

    mlp = OurMLP(tokens=4096, d_model=4096, hidden=8192)          # bf16 weights on the GPU
    y = mlp(x)                                                    # eager
    y = torch.compile(mlp, fullgraph=True)(x)                     # one graph: our ops stay in it

The GEMMs are registered as torch custom ops (`Kernel.as_torch_op`), so torch.compile traces
through them and fuses the bias + GELU around them with its own kernels; they run on torch's
current stream with outputs from torch's allocator. A custom op is opaque to Inductor, though:
it cannot fold the bias and GELU into our GEMM's epilogue as it does into cuBLAS's. `FusedMLP`
does that fusion itself: bias + GELU and bias run in our GEMMs' epilogues (`mgpu_lab.kernels.gemm.fused`),
so the block is two kernels, eager or compiled. `ReferenceMLP` is the same block with
`torch.nn.functional.linear` (cuBLAS), for checking and timing.
"""

from __future__ import annotations

from typing import Any

from mgpu_lab.kernels.gemm import fused, make_gemm


def _torch() -> Any:
    import torch

    return torch


def linear_op(tokens: int, d_in: int, d_out: int, namespace: str = "mgpu_lab_examples") -> Any:
    """x (tokens, d_in) @ W.T for W (d_out, d_in), bf16: our GEMM as a torch op (registered once)."""
    kernel = make_gemm(tokens, d_out, d_in, transpose_b=True)
    return kernel.as_torch_op(f"{namespace}::linear_{tokens}x{d_out}x{d_in}")


def fused_linear_op(tokens: int, d_in: int, d_out: int, activation: str | None = None,
                    namespace: str = "mgpu_lab_examples") -> Any:
    """activation(x (tokens, d_in) @ W.T + b) for W (d_out, d_in), b (d_out,), bf16, the bias and
    activation in the GEMM's epilogue: a torch op taking (x, W, b) (registered once)."""
    epilogue = fused(tokens, d_out, bias="bfloat16", activation=activation)
    kernel = make_gemm(tokens, d_out, d_in, transpose_b=True, epilogue=epilogue.fn, epilogue_inputs=epilogue.inputs)
    return kernel.as_torch_op(f"{namespace}::linear_bias_{activation or 'none'}_{tokens}x{d_out}x{d_in}")


class ReferenceMLP:
    """y = gelu(x @ W1.T + b1) @ W2.T + b2 with torch's linear (cuBLAS), bf16 weights."""

    def __init__(self, d_model: int, hidden: int, *, seed: int = 0):
        torch = _torch()
        gen = torch.Generator(device="cuda").manual_seed(seed)

        def weight(rows: int, cols: int) -> Any:
            return (torch.randn((rows, cols), device="cuda", generator=gen) / cols ** 0.5).to(torch.bfloat16)

        self.w1, self.w2 = weight(hidden, d_model), weight(d_model, hidden)
        self.b1 = (0.1 * torch.randn(hidden, device="cuda", generator=gen)).to(torch.bfloat16)
        self.b2 = (0.1 * torch.randn(d_model, device="cuda", generator=gen)).to(torch.bfloat16)

    def linear(self, x: Any, w: Any) -> Any:
        return _torch().nn.functional.linear(x, w)

    def __call__(self, x: Any) -> Any:
        torch = _torch()
        h = torch.nn.functional.gelu(self.linear(x, self.w1) + self.b1, approximate="tanh")
        return self.linear(h, self.w2) + self.b2

    def reference(self, x: Any) -> Any:
        """The block in float32 from the same bf16 values: what both versions are checked against."""
        torch = _torch()
        h = torch.nn.functional.gelu(x.float() @ self.w1.float().T + self.b1.float(), approximate="tanh")
        return h.to(torch.bfloat16).float() @ self.w2.float().T + self.b2.float()


class OurMLP(ReferenceMLP):
    """The same block and weights, with both matmuls done by our GEMM kernel as torch ops."""

    def __init__(self, tokens: int, d_model: int, hidden: int, *, seed: int = 0):
        super().__init__(d_model, hidden, seed=seed)
        self._ops = {hidden: linear_op(tokens, d_model, hidden), d_model: linear_op(tokens, hidden, d_model)}

    def linear(self, x: Any, w: Any) -> Any:
        return self._ops[w.shape[0]](x, w)


class FusedMLP(ReferenceMLP):
    """The same block and weights, each matmul one GEMM with its bias (and the GELU) in the epilogue."""

    def __init__(self, tokens: int, d_model: int, hidden: int, *, seed: int = 0):
        super().__init__(d_model, hidden, seed=seed)
        self._up = fused_linear_op(tokens, d_model, hidden, "gelu")
        self._down = fused_linear_op(tokens, hidden, d_model)

    def __call__(self, x: Any) -> Any:
        return self._down(self._up(x, self.w1, self.b1), self.w2, self.b2)


__all__ = ["FusedMLP", "OurMLP", "ReferenceMLP", "fused_linear_op", "linear_op"]
