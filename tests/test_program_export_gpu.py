"""On the H200: for every kind of Kernel the library builds, the exported module, run in a fresh
interpreter where mgpu_lab cannot be imported, gives the in-process kernel's output bit for bit
(outputs poisoned first, fresh random inputs); and a call on torch tensors returns torch tensors
with the same bits as the call on CuPy arrays."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from program_kinds import KINDS, build

pytestmark = pytest.mark.gpu


def _random_inputs(kernel, rng) -> list[np.ndarray]:
    """Host arrays of the kernel's input specs: normal values (positive for float32 scales of
    FP8 kernels), rounded to the dtype; float8 kept as its bytes (how CuPy holds it)."""
    from mgpu_lab.builder.dtypes import numpy_dtype

    arrays = []
    for spec in kernel.inputs:
        values = rng.standard_normal(tuple(spec.shape)).astype(np.float32)
        if spec.dtype == "float32" and kernel.name.startswith("gemm") and "float8" in kernel.inputs[0].dtype:
            values = np.abs(values) * 0.1 + 0.5  # scales
        host = values.astype(numpy_dtype(spec.dtype))
        arrays.append(host.view(np.uint8) if spec.dtype.startswith("float8") else host)
    return arrays


def _poisoned_outputs(cupy, kernel):
    from test_hopper import poison

    return [poison(cupy, tuple(s.shape), s.dtype) if not s.dtype.startswith("float8") else
            cupy.full(tuple(s.shape), 0xFF, cupy.uint8) for s in kernel.outputs]


RUN_EXPORTED = """
import sys
sys.modules['mgpu_lab'] = None  # as on a machine without mgpu_lab
sys.modules['mlir'] = None
sys.path.insert(0, {folder!r})
import json, numpy as np, cupy, ml_dtypes
import {module} as exported
manifest = json.load(open({manifest!r}))
def load(entry):
    raw = np.fromfile(entry["file"], dtype=np.uint8)
    dtype = np.uint8 if entry["dtype"].startswith("float8") else (
        np.dtype(getattr(ml_dtypes, entry["dtype"])) if entry["dtype"] == "bfloat16" else np.dtype(entry["dtype"]))
    return cupy.asarray(raw.view(dtype).reshape(entry["shape"]))
inputs = [load(e) for e in manifest["inputs"]]
outs = [load(e) for e in manifest["outputs"]]  # poisoned, as the in-process run's
getattr(exported, {name!r})(*inputs, out=outs[0] if len(outs) == 1 else tuple(outs))
for out, entry in zip(outs, manifest["outputs"]):
    out.get().view(np.uint8).tofile(entry["file"] + ".exported")
print("ran", len(exported.PROGRAM["launches"]), "launch(es)")
"""


def _save(array: np.ndarray, path, dtype: str) -> dict:
    np.ascontiguousarray(array).view(np.uint8).tofile(path)
    return {"file": str(path), "shape": list(array.shape), "dtype": dtype}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_exported_module_gives_the_same_bits_in_a_fresh_interpreter(kind, tmp_path, rng):
    import cupy

    kernel = build(kind)
    host = _random_inputs(kernel, rng)
    inputs = [cupy.asarray(a) for a in host]
    outs = _poisoned_outputs(cupy, kernel)
    poisoned = [o.get() for o in outs]
    kernel(*inputs, out=outs[0] if len(outs) == 1 else tuple(outs))
    ours = [o.get() for o in outs]
    for got, before in zip(ours, poisoned):
        assert not np.array_equal(got.view(np.uint8), before.view(np.uint8)), f"{kind}: the output was not written"
    module = f"exported_{kind}"
    kernel.export(tmp_path / f"{module}.py")
    manifest = {"inputs": [_save(a, tmp_path / f"in{i}.bin", s.dtype) for i, (a, s) in enumerate(zip(host, kernel.inputs))],
                "outputs": [_save(p, tmp_path / f"out{i}.bin", s.dtype)
                            for i, (p, s) in enumerate(zip(poisoned, kernel.outputs))]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    script = RUN_EXPORTED.format(folder=str(tmp_path), module=module, manifest=str(tmp_path / "manifest.json"),
                                 name=kernel.name)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"ran {len(kernel.launches)} launch(es)" in run.stdout
    for i, mine in enumerate(ours):
        theirs = np.fromfile(str(tmp_path / f"out{i}.bin.exported"), dtype=np.uint8)
        assert np.array_equal(theirs, mine.view(np.uint8).ravel()), f"{kind}: output {i} differs from in-process"


@pytest.mark.parametrize("kind", ["plain", "split_k_workspace", "stream_k", "padded", "fp8"])
def test_torch_tensors_in_torch_tensors_out(kind, rng):
    """The same call on torch tensors returns torch tensors on the inputs' device with the CuPy
    call's bits, on the fast path (no out=) and the explaining one (out= given)."""
    import cupy

    torch = pytest.importorskip("torch")
    kernel = build(kind)
    host = _random_inputs(kernel, rng)
    want = kernel(*[cupy.asarray(a) for a in host])
    want = [want] if not isinstance(want, tuple) else list(want)
    tensors = [torch.from_numpy(a.view(np.uint8) if a.dtype.itemsize == 2 and a.dtype.kind == "V" else a)
               .cuda() for a in host]
    tensors = [t.view(getattr(torch, s.dtype)) if s.dtype in ("bfloat16", "float8_e4m3fn") else t
               for t, s in zip(tensors, kernel.inputs)]
    got = kernel(*tensors)
    got = [got] if not isinstance(got, tuple) else list(got)
    assert all(isinstance(g, torch.Tensor) and g.device == tensors[0].device for g in got)
    for g, w, spec in zip(got, want, kernel.outputs):
        assert str(g.dtype) == f"torch.{spec.dtype}"
        assert np.array_equal(g.view(torch.uint8).cpu().numpy().ravel(), w.get().view(np.uint8).ravel()), kind
    outs = [torch.full(tuple(s.shape), float("nan"), dtype=getattr(torch, s.dtype), device="cuda")
            for s in kernel.outputs]
    kernel(*tensors, out=outs[0] if len(outs) == 1 else tuple(outs))
    assert np.array_equal(outs[0].view(torch.uint8).cpu().numpy().ravel(), want[0].get().view(np.uint8).ravel())


def test_the_torch_op_of_a_workspace_split_k_matches_the_call_and_captures_in_a_graph(rng):
    import cupy

    torch = pytest.importorskip("torch")
    kernel = build("split_k_workspace")
    op = kernel.as_torch_op("mgpu_program_test::split_k")
    host = _random_inputs(kernel, rng)
    want = kernel(*[cupy.asarray(a) for a in host]).get().view(np.uint8)
    a, b = (torch.from_numpy(x.view(np.uint16)).cuda().view(torch.bfloat16) for x in host)
    assert np.array_equal(op(a, b).view(torch.uint8).cpu().numpy(), want)
    graph, stream = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    with torch.cuda.stream(stream):
        op(a, b)  # warm up on the capture stream
        with torch.cuda.graph(graph, stream=stream):
            captured = op(a, b)
    captured.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert np.array_equal(captured.view(torch.uint8).cpu().numpy(), want)


def test_jax_arrays_in_jax_arrays_out(rng):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from mgpu_lab.examples.vector_add import make_vector_add

    kernel = make_vector_add(1 << 12)
    x = rng.standard_normal(1 << 12).astype(np.float32)
    got = kernel(jnp.asarray(x), jnp.asarray(x))
    assert isinstance(got, jax.Array)
    np.testing.assert_array_equal(np.asarray(got), x + x)


@pytest.mark.parametrize("kind", ["split_k_workspace", "padded", "stream_k"])
def test_an_isolated_call_runs_every_launch_of_the_program_in_the_worker(kind, rng):
    """isolate=True on a program of several steps: each launch runs in the isolated worker on the
    caller's memory (scratch included), copies here; the bits are the in-process call's."""
    import cupy

    kernel = build(kind)
    inputs = [cupy.asarray(a) for a in _random_inputs(kernel, rng)]
    want = kernel(*inputs).get()
    got = kernel(*inputs, isolate=True, timeout_s=60).get()
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), kind


def test_profiling_a_program_traces_its_main_launch(rng):
    import cupy

    from mgpu_lab.kernels.gemm import make_gemm

    kernel = make_gemm(512, 512, 16384, split_k=16, split_k_reduce="workspace", profile=True)
    a, b = (cupy.asarray(x) for x in _random_inputs(kernel, rng))
    kernel(a, b)
    traces = kernel.last_traces
    assert traces[0] is not None and traces[1] is None, "the GEMM launch is profiled, the reduce is not"
    assert traces[0].num_events > 0 and kernel.last_trace.num_events == traces[0].num_events


@pytest.mark.parametrize("kind", ["plain", "padded", "stream_k", "fp8"])
def test_the_torch_op_of_every_kind_gives_the_calls_bits(kind, rng):
    """The op allocates outputs and scratch (zero-filled where declared: a padded operand's
    buffer) from torch's allocator on every call; its bits are the CuPy call's."""
    import cupy

    torch = pytest.importorskip("torch")
    kernel = build(kind)
    op = kernel.as_torch_op(f"mgpu_program_test::{kind}")
    host = _random_inputs(kernel, rng)
    want = kernel(*[cupy.asarray(a) for a in host]).get().view(np.uint8)
    tensors = []
    for a, spec in zip(host, kernel.inputs):
        t = torch.from_numpy(a.view(np.uint16) if spec.dtype == "bfloat16" else a).cuda()
        tensors.append(t.view(getattr(torch, spec.dtype)) if spec.dtype in ("bfloat16", "float8_e4m3fn") else t)
    for _ in range(2):  # twice: scratch handed back to the allocator and taken again
        assert np.array_equal(op(*tensors).view(torch.uint8).cpu().numpy().ravel(), want.ravel()), kind
