"""Kernels as PyTorch custom ops: eager, torch.compile(fullgraph=True), streams, CUDA graphs, export.

GPU tests: they need CUDA tensors. Each test registers ops under its own name (torch cannot
redefine an op in a running process).
"""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from mgpu_lab.examples.scaled_add import make_scaled_add
from mgpu_lab.examples.vector_add import make_vector_add

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
_names = itertools.count()

# Runs a script where `mlir` and `mgpu_lab` cannot be imported, as on a machine without them.
BLOCKER = "import sys\nsys.modules['mlir'] = None\nsys.modules['mgpu_lab'] = None\n"


def _qualname(stem: str) -> str:
    return f"mgpu_test::{stem}_{next(_names)}"


def _randn(rng, shape, dtype):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to("cuda", dtype)


@pytest.fixture(scope="module")
def vector_add():
    return make_vector_add(1 << 20)


@pytest.fixture(scope="module")
def scaled_add_bf16():
    return make_scaled_add(512, 1024, a=1.5, b=-0.25, dtype="bfloat16")


def test_eager_op_matches_reference_on_both_launch_paths(vector_add, scaled_add_bf16, rng):
    add = vector_add.as_torch_op(_qualname("add"))
    x, y = _randn(rng, 1 << 20, torch.float32), _randn(rng, 1 << 20, torch.float32)
    out = add(x, y)
    assert out.dtype == torch.float32 and out.device == x.device
    torch.testing.assert_close(out.double(), x.double() + y.double(), rtol=1e-6, atol=1e-6)

    scale = scaled_add_bf16.as_torch_op(_qualname("scale"))  # TMA: the cuLaunchKernel path
    z = _randn(rng, (512, 1024), torch.bfloat16)
    got = scale(z)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), (1.5 * z.double() - 0.25), rtol=1e-2, atol=1e-2)


def test_registering_twice_returns_the_same_op_and_another_kernel_is_refused(vector_add, scaled_add_bf16):
    from mgpu_lab.runtime.torch_op import TorchOpError

    name = _qualname("twice")
    assert vector_add.as_torch_op(name) is vector_add.as_torch_op(name)
    with pytest.raises(TorchOpError, match="already registered for kernel 'vector_add'"):
        scaled_add_bf16.as_torch_op(name)


def test_eager_calls_skip_the_dispatcher_and_everything_else_goes_through_it(vector_add, rng):
    """Plain eager tensors run the op's CUDA implementation directly; a dispatch mode, an input
    that needs grad, or a mismatch to explain reach `torch.ops` (where torch sees the op)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from mgpu_lab.runtime.torch_op import TorchOp, TorchOpError

    add = vector_add.as_torch_op(_qualname("eager"))
    assert isinstance(add, TorchOp) and add.default is add.packet.default  # the packet's attributes read through
    dispatched = []
    packet = add.packet
    add.__dict__["packet"] = lambda *t: dispatched.append(len(t)) or packet(*t)
    x, y = _randn(rng, 1 << 20, torch.float32), _randn(rng, 1 << 20, torch.float32)
    torch.testing.assert_close(add(x, y).double(), x.double() + y.double(), rtol=1e-6, atol=1e-6)
    assert dispatched == []

    class Seen(TorchDispatchMode):
        ops: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    with Seen():
        torch.testing.assert_close(add(x, y), x + y, rtol=1e-6, atol=1e-6)
    assert dispatched == [2] and any("eager" in op for op in Seen.ops)
    add(x.requires_grad_(), y)
    assert dispatched == [2, 2]
    with torch.no_grad():
        add(x, y)  # no grad mode: the direct path again
    assert dispatched == [2, 2]
    with pytest.raises(TorchOpError, match="expected shape"):
        add(x[:100].detach(), y[:100])
    assert dispatched == [2, 2, 2]
    weight = torch.nn.Parameter(y.clone())  # a layer's weight: a parameter, not a plain tensor
    with torch.inference_mode():
        torch.testing.assert_close(add(x.detach(), weight), x.detach() + weight, rtol=1e-6, atol=1e-6)
    assert dispatched == [2, 2, 2]


def test_torch_compile_fullgraph_keeps_the_op(vector_add, rng):
    add = vector_add.as_torch_op(_qualname("compiled_add"))

    def block(x, y):
        return torch.relu(add(x * 2.0, y)) - y

    x, y = _randn(rng, 1 << 20, torch.float32), _randn(rng, 1 << 20, torch.float32)
    eager = block(x, y)
    explained = torch._dynamo.explain(block)(x, y)
    assert explained.graph_break_count == 0, explained.break_reasons
    compiled = torch.compile(block, fullgraph=True)
    torch.testing.assert_close(compiled(x, y), eager, rtol=0, atol=0)
    reference = torch.relu(2.0 * x.double() + y.double()) - y.double()
    torch.testing.assert_close(eager.double(), reference, rtol=1e-6, atol=1e-6)


def test_fake_implementation_checks_shapes_while_tracing(vector_add):
    from mgpu_lab.runtime.torch_op import TorchOpError

    add = vector_add.as_torch_op(_qualname("fake_check"))
    short = torch.zeros(100, device="cuda")
    with pytest.raises(TorchOpError, match=r"input 0 of mgpu_test::fake_check_\d+: expected shape \(1048576,\), got \(100,\)"):
        add(short, short)
    compiled = torch.compile(lambda a, b: add(a, b), fullgraph=True)
    with pytest.raises(Exception, match="expected shape"):
        compiled(short, short)
    with pytest.raises(TorchOpError, match="expected dtype torch.float32, got torch.float16"):
        half = torch.zeros(1 << 20, device="cuda", dtype=torch.float16)
        add(half, half)


def test_cpu_and_strided_tensors_get_the_launchers_errors(vector_add):
    add = vector_add.as_torch_op(_qualname("errors"))
    cpu = torch.zeros(1 << 20)
    with pytest.raises(NotImplementedError, match="CPU"):
        add(cpu, cpu)  # torch's dispatcher: the op has a CUDA kernel only
    strided = torch.zeros(2 << 20, device="cuda")[::2]
    with pytest.raises(Exception, match="expected a C-contiguous array"):
        add(strided, strided)


def test_op_runs_on_torch_current_stream(vector_add):
    """x is NaN until a fill queued behind a long sleep on stream s: the op reads 3.0 only if it
    runs on s after the fill, NaN if it ran on any other stream."""
    add = vector_add.as_torch_op(_qualname("stream"))
    x = torch.full((1 << 20,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU cycles
        x.fill_(3.0)
        y = add(x, x)
    s.synchronize()
    assert torch.equal(y, torch.full_like(y, 6.0))


def test_op_mixed_with_torch_ops_on_several_streams(vector_add, rng):
    add = vector_add.as_torch_op(_qualname("streams"))
    a = _randn(rng, 1 << 20, torch.float32)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(s1):
        torch.cuda._sleep(100_000_000)
        b = a * 2.0
    with torch.cuda.stream(s2):
        s2.wait_stream(s1)
        c = add(a, b)
        d = c.sin()
    torch.cuda.current_stream().wait_stream(s2)
    torch.testing.assert_close(d.double(), (3.0 * a.double()).sin(), rtol=1e-5, atol=1e-5)


def test_cuda_graph_capture_and_replay(vector_add, scaled_add_bf16, rng):
    add = vector_add.as_torch_op(_qualname("graph_add"))
    scale = scaled_add_bf16.as_torch_op(_qualname("graph_scale"))
    x = _randn(rng, 1 << 20, torch.float32)
    z = _randn(rng, (512, 1024), torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture (module load, first-call checks)
        add(x, x)
        scale(z)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = add(x, x)
        w = scale(z)
    x.copy_(_randn(rng, 1 << 20, torch.float32))
    z.copy_(_randn(rng, (512, 1024), torch.bfloat16))
    y.fill_(float("nan"))
    w.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(y.double(), 2.0 * x.double(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(w.double(), 1.5 * z.double() - 0.25, rtol=1e-2, atol=1e-2)


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_wrong_device_tensor_is_refused(vector_add):
    from mgpu_lab.runtime.torch_op import TorchOpError

    add = vector_add.as_torch_op(_qualname("device"))
    a = torch.zeros(1 << 20, device="cuda:0")
    b = torch.zeros(1 << 20, device="cuda:1")
    with pytest.raises(TorchOpError, match="input 1 of .*: expected a tensor on cuda:0 like input 0, got one on cuda:1"):
        add(a, b)


def test_exported_module_registers_the_op_without_mgpu_lab(tmp_path, vector_add, rng):
    vector_add.export(tmp_path / "exported_add.py")
    x = rng.standard_normal(1 << 20).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    script = BLOCKER + textwrap.dedent(f"""
        import numpy as np, torch
        sys.path.insert(0, {str(tmp_path)!r})
        import exported_add as m
        op = m.as_torch_op("shipped::add")
        x = torch.from_numpy(np.load({str(tmp_path / 'x.npy')!r})).cuda()
        eager = op(x, x)
        compiled = torch.compile(lambda a: op(a, a) + 1.0, fullgraph=True)(x)
        np.save({str(tmp_path / 'eager.npy')!r}, eager.cpu().numpy())
        np.save({str(tmp_path / 'compiled.npy')!r}, compiled.cpu().numpy())
        print("mgpu_lab loaded:", "mgpu_lab.runtime" in sys.modules)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "mgpu_lab loaded: False" in run.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "eager.npy"), 2 * x)
    np.testing.assert_allclose(np.load(tmp_path / "compiled.npy"), 2 * x + 1, rtol=1e-6)


def test_jax_arrays_cross_by_dlpack_without_copies(vector_add, rng):
    jax = pytest.importorskip("jax")
    import cupy
    import jax.numpy as jnp

    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("JAX has no GPU backend here")
    x = jnp.asarray(rng.standard_normal(1 << 20).astype(np.float32))
    out = vector_add(x, x)  # JAX arrays in: DLPack, no copy; JAX out: DLPack again, no copy
    assert isinstance(out, jax.Array)
    np.testing.assert_allclose(np.asarray(out), 2 * np.asarray(x), rtol=1e-6)
    assert cupy.from_dlpack(x).data.ptr == x.unsafe_buffer_pointer()
    target = cupy.full(1 << 20, np.nan, np.float32)  # out= given: written in place, returned as given
    assert vector_add(x, x, out=target) is target
    np.testing.assert_allclose(target.get(), 2 * np.asarray(x), rtol=1e-6)


def test_mlp_block_with_our_gemm_eager_and_compiled_matches_torch():
    from mgpu_lab.examples.torch_mlp import OurMLP, ReferenceMLP

    tokens, d_model, hidden = 256, 512, 1024
    ours, theirs = OurMLP(tokens, d_model, hidden, seed=3), ReferenceMLP(d_model, hidden, seed=3)
    x = torch.randn((tokens, d_model), device="cuda").to(torch.bfloat16)
    reference = ours.reference(x)

    def rel(y):
        return ((y.float() - reference).norm() / reference.norm()).item()

    eager = ours(x)
    compiled = torch.compile(ours.__call__, fullgraph=True)(x)
    assert eager.shape == (tokens, d_model) and eager.dtype == torch.bfloat16
    assert rel(eager) < 1e-2 and rel(compiled) < 1e-2
    assert rel(theirs(x)) < 1e-2  # the torch block computes the same function


def test_fused_mlp_block_bias_and_gelu_in_our_epilogues_matches_torch():
    """FusedMLP: two GEMM ops with bias (+ GELU) in their epilogues, eager and compiled, and no
    elementwise kernel of torch's in between (the compiled graph is the two ops)."""
    from mgpu_lab.examples.torch_mlp import FusedMLP

    tokens, d_model, hidden = 256, 512, 1024
    ours = FusedMLP(tokens, d_model, hidden, seed=4)
    x = torch.randn((tokens, d_model), device="cuda").to(torch.bfloat16)
    reference = ours.reference(x)
    for y in (ours(x), torch.compile(ours.__call__, fullgraph=True)(x)):
        assert y.shape == (tokens, d_model) and y.dtype == torch.bfloat16
        assert ((y.float() - reference).norm() / reference.norm()).item() < 1e-2
    graph = torch._dynamo.explain(ours.__call__)(x)
    assert graph.graph_break_count == 0
    ops = [n.target for g in graph.graphs for n in g.graph.nodes if n.op == "call_function"]
    assert len(ops) == 2, ops  # the two fused GEMMs, nothing else


@pytest.mark.parametrize("reduce", ["cluster", "workspace"])
def test_split_k_gemm_as_one_op_eager_compiled_and_captured(reduce, rng):
    """A split-K GEMM is one op, both ways: one cluster launch summing through distributed
    shared memory, or two launches and an f32 workspace that comes from torch's allocator per
    call, so two streams at once and a captured graph stay correct."""
    from mgpu_lab.kernels.gemm import make_gemm

    m, n, k = 64, 256, 4096
    gemm = make_gemm(m, n, k, split_k=4, split_k_reduce=reduce)
    op = gemm.as_torch_op(_qualname(f"split_k_{reduce}"))
    a, b = _randn(rng, (m, k), torch.bfloat16), _randn(rng, (k, n), torch.bfloat16)
    a2 = _randn(rng, (m, k), torch.bfloat16)

    def expect(x):
        return x.double() @ b.double()

    def close(y, x):
        torch.testing.assert_close(y.double(), expect(x), rtol=2e-2, atol=2e-1)

    close(op(a, b), a)
    close(torch.compile(lambda x, y: op(x, y), fullgraph=True)(a, b), a)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for s in (s1, s2):
        s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s1):
        y1 = op(a, b)
    with torch.cuda.stream(s2):
        y2 = op(a2, b)
    torch.cuda.synchronize()
    close(y1, a)
    close(y2, a2)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = op(a, b)
    a.copy_(a2)
    y.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    close(y, a2)


def test_reshaped_gemm_op_runs_a_linears_3d_input_eager_compiled_and_captured(rng):
    """A GEMM op over a Linear's (batch, tokens, k) input and (batch, tokens, n) output (what the
    HF router calls): eager without the dispatcher, traced by torch.compile, captured in a CUDA
    graph, and refused by name on a tensor of another shape; outputs poisoned before each check."""
    from mgpu_lab.kernels.gemm import fused, make_gemm

    batch, tokens, n, k = 3, 40, 256, 512
    epilogue = fused(batch * tokens, n, bias="bfloat16")
    gemm = make_gemm(batch * tokens, n, k, transpose_b=True, epilogue=epilogue.fn, epilogue_inputs=epilogue.inputs)
    op = gemm.as_torch_op(_qualname("reshaped_linear"))
    linear = op.reshaped([(batch, tokens, k), (n, k), (n,)], [(batch, tokens, n)])
    x, w = _randn(rng, (batch, tokens, k), torch.bfloat16), _randn(rng, (n, k), torch.bfloat16)
    bias = _randn(rng, (n,), torch.bfloat16)

    def close(y, x):
        assert y.shape == (batch, tokens, n) and y.dtype == torch.bfloat16
        torch.testing.assert_close(y.double(), x.double() @ w.double().T + bias.double(), rtol=2e-2, atol=2e-1)

    dispatched = []
    packet = op.packet
    op.__dict__["packet"] = lambda *t: dispatched.append(len(t)) or packet(*t)
    with torch.inference_mode():
        close(linear(x, w, bias), x)
    assert dispatched == []
    op.__dict__["packet"] = packet
    close(torch.compile(lambda a, b, c: linear(a, b, c), fullgraph=True)(x, w, bias), x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = linear(x, w, bias)
    x2 = _randn(rng, (batch, tokens, k), torch.bfloat16)
    x.copy_(x2)
    y.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    close(y, x2)
    from mgpu_lab.runtime.torch_op import TorchOpError

    with pytest.raises(TorchOpError, match=r"input 0 of .*reshaped_linear.* \(reshaped\): expected shape"):
        linear(x.view(tokens, batch, k), w, bias)
