"""The torch-op entry point's checks that need no GPU and no torch."""

from __future__ import annotations

import re

import pytest

from mgpu_lab.examples.vector_add import make_vector_add
from mgpu_lab.runtime.export import export_source
from mgpu_lab.runtime.torch_op import TorchOpError, _schema


@pytest.mark.parametrize("bad", ["add", "mylib:add", "my lib::add", "mylib::add(x)", "::add", "mylib::", 3])
def test_qualname_must_be_namespace_colon_colon_name(bad):
    k = make_vector_add(1024)
    with pytest.raises(TorchOpError, match=r"qualname: expected 'namespace::name' .*got " + re.escape(repr(bad))):
        k.as_torch_op(bad)


def test_schema_lists_one_tensor_per_input_and_output():
    assert _schema(2, 1) == "(Tensor x0, Tensor x1) -> Tensor"
    assert _schema(1, 2) == "(Tensor x0) -> (Tensor, Tensor)"


def test_exported_module_offers_as_torch_op_without_importing_torch_at_load():
    source = export_source(make_vector_add(1024).compiled, "shipped")
    assert "def as_torch_op(qualname):" in source and '"as_torch_op"' in source
    namespace: dict = {}
    exec(compile(source, "shipped.py", "exec"), namespace)  # loads with numpy and cupy only
    assert callable(namespace["as_torch_op"])
    # torch is imported inside register_torch_op only, so the module loads where torch is absent.
    assert "import torch" not in source.split("def register_torch_op")[0]


def _fake_torch(streams: list, capturing: list, allocations: list):
    """Just what TorchEagerCall touches of torch: tensors with pointers, zeros/empty that record
    each allocation, the current raw stream and whether it is being captured."""
    from types import SimpleNamespace

    class Tensor:
        def __init__(self, shape, dtype, pointer):
            self.shape, self.dtype, self._pointer = tuple(shape), dtype, pointer
            self.requires_grad, self.device = False, SimpleNamespace(index=0)

        def is_contiguous(self):
            return True

        def get_device(self):
            return 0

        def data_ptr(self):
            return self._pointer

    def allocator(kind):
        def make(shape, dtype=None, device=None):
            allocations.append((kind, tuple(shape)))
            return Tensor(shape, dtype, 0x100000 * len(allocations))
        return make

    torch = SimpleNamespace(Tensor=Tensor, nn=SimpleNamespace(Parameter=Tensor), zeros=allocator("zeros"),
                            empty=allocator("empty"), is_grad_enabled=lambda: False,
                            cuda=SimpleNamespace(is_current_stream_capturing=lambda: capturing[-1]),
                            _C=SimpleNamespace(_cuda_getCurrentRawStream=lambda index: streams[-1]))
    return torch, Tensor


def test_eager_op_keeps_scratch_per_stream_and_allocates_it_fresh_while_capturing(monkeypatch):
    """A stream-K op's zeroed flags and workspace: allocated (and zero-filled) once per (device,
    stream) in eager calls, not a fill kernel per call; per call while a CUDA graph is captured,
    so the graph owns its own; another stream gets its own."""
    import sys
    from types import SimpleNamespace

    from mgpu_lab.runtime.torch_op import TorchEagerCall

    streams, capturing, allocations, launches = [7], [False], [], []
    torch, Tensor = _fake_torch(streams, capturing, allocations)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(
        getDevice=lambda: 0))))
    scratch = [((64,), "float32", "float32", False), ((132,), "int32", "int32", True)]
    call = TorchEagerCall(torch, [((4, 4), "bf16")], [((4, 4), "bf16")], scratch,
                          lambda pointers, index, stream, temps=None: launches.append((stream, tuple(temps))))
    x = Tensor((4, 4), "bf16", 0x7000)
    for _ in range(3):
        call((x,))
    assert [a for a in allocations if a[1] != (4, 4)] == [("empty", (64,)), ("zeros", (132,))]
    assert len({temps for _, temps in launches}) == 1, "eager calls on one stream reuse their scratch"
    streams.append(9)
    call((x,))
    assert launches[-1][0] == 9 and launches[-1][1] != launches[0][1], "another stream, its own scratch"
    capturing.append(True)
    call((x,))
    call((x,))
    fresh = [launch[1] for launch in launches[-2:]]
    assert fresh[0] != fresh[1] and launches[0][1] not in fresh, "a capture allocates per call"
    capturing.append(False)
    call((x,))
    assert launches[-1][1] == launches[3][1], "after the capture, the stream's kept scratch again"


def _reshaped_op_setup(monkeypatch, launches: list, dispatched: list):
    """A TorchOp of a (15, 8) x (4, 8) -> (15, 4) kernel over fake torch: the eager path records
    its launches, the dispatcher path (`packet`) the shapes it was given."""
    import sys
    from types import SimpleNamespace

    from mgpu_lab.runtime.torch_op import TorchEagerCall, TorchOp

    torch, Tensor = _fake_torch([7], [False], [])
    torch._C.__dict__.update(_len_torch_dispatch_stack=lambda: 0, _is_torch_function_mode_enabled=lambda: False,
                             _functorch=SimpleNamespace(peek_interpreter_stack=lambda: None))
    torch.compiler = SimpleNamespace(is_compiling=lambda: False)
    Tensor.reshape = lambda self, shape: Tensor(shape, self.dtype, self._pointer)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(
        getDevice=lambda: 0))))
    eager = TorchEagerCall(torch, [((15, 8), "bf16"), ((4, 8), "bf16")], [((15, 4), "bf16")], [],
                           lambda pointers, index, stream: launches.append(tuple(pointers)))

    def packet(*tensors):
        dispatched.append([t.shape for t in tensors])
        return Tensor((15, 4), "bf16", 0x9000)

    return TorchOp(torch, packet, eager, "lib::mm"), Tensor


def test_reshaped_op_runs_the_kernel_on_the_tensors_own_shapes(monkeypatch):
    """A Linear's (3, 5, 8) input on a kernel of (15, 8) rows: the eager call launches on the
    tensors' own pointers and returns a (3, 5, 4) output, with no reshape on either side; a
    tensor of another shape is refused by name; a dtype the fast path does not take reshapes
    to the kernel's shapes and goes through the op."""
    launches, dispatched = [], []
    op, Tensor = _reshaped_op_setup(monkeypatch, launches, dispatched)
    linear = op.reshaped([(3, 5, 8), (4, 8)], [(3, 5, 4)])
    x, w = Tensor((3, 5, 8), "bf16", 0x1000), Tensor((4, 8), "bf16", 0x2000)
    y = linear(x, w)
    assert y.shape == (3, 5, 4) and dispatched == []
    assert launches == [(0x1000, 0x2000, y._pointer)]
    with pytest.raises(TorchOpError, match=r"input 0 of lib::mm \(reshaped\): expected shape \(3, 5, 8\), "
                                           r"got \(5, 3, 8\)"):
        linear(Tensor((5, 3, 8), "bf16", 0x1000), w)
    out = linear(Tensor((3, 5, 8), "f32", 0x1000), w)  # not what the fast path takes: through the op
    assert dispatched == [[(15, 8), (4, 8)]] and out.shape == (3, 5, 4)


@pytest.mark.parametrize("inputs, outputs, message", [
    ([(3, 5, 9), (4, 8)], [(3, 5, 4)], r"input_shapes\[0\] of lib::mm.reshaped: expected a shape of 120 elements, "
                                       r"as the kernel's \(15, 8\), got \(3, 5, 9\)"),
    ([(3, 5, 8)], [(3, 5, 4)], r"input_shapes of lib::mm.reshaped: expected 2 shape\(s\), one per input of the "
                               r"kernel, got 1"),
    ([(3, 5, 8), (4, 8)], [(60,)], None),
    ([(3, 5, 8), (4, 8)], [(15, 5)], r"output_shapes\[0\] of lib::mm.reshaped: expected a shape of 60 elements"),
    ([(3, 5, 8), (4, 8)], "3x5x4", r"output_shapes of lib::mm.reshaped: expected one shape \(a tuple of ints\) "
                                   r"per output, got '3x5x4'"),
])
def test_reshaped_op_checks_the_shapes_it_is_given(monkeypatch, inputs, outputs, message):
    op, _ = _reshaped_op_setup(monkeypatch, [], [])
    if message is None:
        assert op.reshaped(inputs, outputs).output_shapes == [(60,)]  # any shape of as many elements
        return
    with pytest.raises(TorchOpError, match=message):
        op.reshaped(inputs, outputs)
