"""route_linears on CUDA: a stack of bf16 / fp16 / f32 nn.Linear layers with and without bias,
called on 3-D inputs, against an f64 reference of the same layers; the layers' own outputs come
from torch's allocator, poisoned (NaN-filled memory handed back to its cache) before each call."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def _poison_allocator(nbytes: int) -> None:
    """Fill free memory of torch's caching allocator with NaN: the next outputs land on it."""
    junk = torch.full((nbytes // 2,), float("nan"), dtype=torch.bfloat16, device="cuda")
    del junk


def test_route_linears_matches_f64_on_every_dtype_and_counts_what_it_left(rng):
    from mgpu_lab.kernels.gemm import route_linears
    from mgpu_lab.runtime.torch_op import ReshapedTorchOp

    torch.manual_seed(int(rng.integers(1 << 30)))
    layers = torch.nn.ModuleDict({
        "bf16_bias": torch.nn.Linear(256, 384, device="cuda", dtype=torch.bfloat16),
        "bf16": torch.nn.Linear(384, 128, bias=False, device="cuda", dtype=torch.bfloat16),
        "fp16": torch.nn.Linear(256, 192, device="cuda", dtype=torch.float16),
        "f32": torch.nn.Linear(64, 32, device="cuda", dtype=torch.float32),
    })
    router = route_linears(layers)
    inputs = {"bf16_bias": torch.randn(3, 40, 256, device="cuda", dtype=torch.bfloat16),
              "bf16": torch.randn(2, 60, 384, device="cuda", dtype=torch.bfloat16),
              "fp16": torch.randn(5, 8, 256, device="cuda", dtype=torch.float16),
              "f32": torch.randn(7, 64, device="cuda")}
    with torch.inference_mode():
        for _ in range(2):  # the second call runs the cached shaped call
            for name, x in inputs.items():
                layer = layers[name]
                _poison_allocator(1 << 24)
                y = layer(x)
                want = x.double() @ layer.weight.double().T
                if layer.bias is not None:
                    want = want + layer.bias.double()
                assert y.shape == (*x.shape[:-1], layer.out_features) and y.dtype == x.dtype
                assert torch.isfinite(y).all(), name
                torch.testing.assert_close(y.double(), want, rtol=2e-2, atol=5e-2 if x.dtype != torch.float32 else 1e-4)
    assert router.routed_calls == 6 and router.fallback_calls == {"no kernel for torch.float32": 2}
    assert sorted(router.shapes_built()) == ["120x128x384", "120x384x256_bias", "40x192x256_bias_float16"]
    # the bf16 layers' cached calls run over the 3-D shapes themselves (no views around the op)
    for name in ("bf16_bias", "bf16", "fp16"):
        cells = [cell.cell_contents for cell in layers[name].forward.__closure__]
        cached = [c for c in cells if isinstance(c, dict) and c and not isinstance(next(iter(c)), str)]
        assert [type(call) for call in cached[0].values()] == [ReshapedTorchOp], name
    router.unroute()
    assert all("forward" not in vars(module) for module in layers.values())
