"""A compiled kernel as a PyTorch custom op (`torch.library`), so `torch.compile` keeps it in the graph.

Self-contained on purpose, like `portable.py`: the exporter copies this source verbatim into exported
modules, so a shipped kernel registers the same op without mgpu_lab. It needs only torch, CuPy and a
launcher object with the `PortableLauncher` interface (`spec`, `__call__(*inputs, out=, stream=)`).

What the op does on a call:
- outputs come from torch's caching allocator on the inputs' device (never from CuPy's pool);
- the launch goes to torch's current stream of that device, so `torch.cuda.stream(s)` blocks and
  CUDA-graph capture work as they do for torch's own kernels;
- tensors cross as CuPy views of their memory (no copies, no DLPack stream handshake, which would
  record events on other streams and break graph capture); bf16 and float8 map without copies;
- scratch buffers a launcher declares (`spec["scratch"]`: (shape, dtype) or (shape, dtype, "zeros"),
  e.g. split-K's f32 partial sums, stream-K's zeroed flags) come from torch's allocator: in eager
  calls once per (device, stream), kept for later calls on that stream (stream order keeps them
  apart, and a kernel leaves zeroed scratch zero, as the CuPy path's kept buffers rely on too: no
  fill kernel per call), and on every call while a CUDA graph is being captured, so the graph
  owns its own;
- the launcher's own checks (shape, dtype, contiguity, alignment, device) run on every call, so the
  errors read as they do on the CuPy path; the fake implementation repeats the shape and dtype
  checks, so `torch.compile` reports them while tracing.

What `register_torch_op` returns is a `TorchOp`: called in plain eager mode on plain CUDA tensors
that match the signature exactly, it runs the same implementation without the trip through torch's
dispatcher (a Python op costs ~3-5 us of host time there, as much as the launch itself); anything
else (torch.compile tracing, dispatch or function modes, functorch transforms, tensors that need
grad, subclasses, other devices, a mismatch to explain) goes through `torch.ops.namespace.name`.
`TorchOp.reshaped(...)` is the same op over other shapes of the same memory (a Linear's
(batch, tokens, k) input for a kernel of (batch * tokens, k) rows): the eager call reads the pointers
as they are, where two `view`s around the op would cost a few microseconds of host time a call.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

_QUALNAME = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)$")

# Libraries stay alive as long as the process: dropping a torch.library.Library unregisters its ops.
_LIBRARIES: dict[str, Any] = {}
_REGISTERED: dict[str, Any] = {}


class TorchOpError(ValueError):
    """A tensor given to a kernel's torch op does not match the kernel's signature."""


def _torch_dtype(torch: Any, name: str) -> Any:
    dtype = getattr(torch, name, None)
    if dtype is None:
        raise TorchOpError(f"dtype: this torch ({torch.__version__}) has no dtype {name!r}")
    return dtype


def _schema(n_inputs: int, n_outputs: int) -> str:
    args = ", ".join(f"Tensor x{i}" for i in range(n_inputs))
    result = "Tensor" if n_outputs == 1 else "(" + ", ".join(["Tensor"] * n_outputs) + ")"
    return f"({args}) -> {result}"


def _check_tensor(torch: Any, op: str, position: int, t: Any, shape: tuple, dtype: Any) -> None:
    """The shape and dtype checks of the launcher, in torch's terms (they also run on fake tensors)."""
    if not isinstance(t, torch.Tensor):
        raise TorchOpError(f"input {position} of {op}: expected a torch.Tensor, got {type(t).__name__}")
    if tuple(t.shape) != shape:
        raise TorchOpError(f"input {position} of {op}: expected shape {shape}, got {tuple(t.shape)}")
    if t.dtype != dtype:
        raise TorchOpError(f"input {position} of {op}: expected dtype {dtype}, got {t.dtype}")


def cupy_view(cupy: Any, t: Any, device_dtype: Any) -> Any:
    """A CuPy array over a contiguous CUDA tensor's memory (any dtype, float8 as its bytes)."""
    memory = cupy.cuda.UnownedMemory(t.data_ptr(), t.numel() * t.element_size(), t, device_id=t.device.index)
    return cupy.ndarray(tuple(t.shape), device_dtype, cupy.cuda.MemoryPointer(memory, 0))


def register_torch_op(launcher: Any, qualname: str) -> Any:
    """Register `launcher`'s kernel as the torch custom op `qualname` ("namespace::name") and return it.

    The op takes the kernel's inputs as tensors and returns its output(s), newly allocated by torch.
    Registering the same name again for the same launcher returns the op already registered; for a
    different kernel it raises, since torch cannot redefine an op in a running process.
    """
    match = _QUALNAME.match(qualname) if isinstance(qualname, str) else None
    if match is None:
        raise TorchOpError(f"qualname: expected 'namespace::name' with Python identifiers on both sides, "
                           f"got {qualname!r}")
    import torch

    if qualname in _REGISTERED:
        owner, op = _REGISTERED[qualname]
        if owner is launcher:
            return op
        raise TorchOpError(f"qualname: {qualname!r} is already registered for kernel {owner.name!r} in this "
                           f"process; torch cannot redefine an op, so pick another name")
    namespace, name = match.groups()
    spec = launcher.spec
    inputs = [(tuple(s), _torch_dtype(torch, d)) for s, d in spec["inputs"]]
    outputs = [(tuple(s), _torch_dtype(torch, d)) for s, d in spec["outputs"]]
    # (shape, torch dtype, the dtype CuPy holds it as, zero-filled): the launcher knows the last
    # (float8 as bytes, bf16 through ml_dtypes), a bare name does not always reach CuPy
    held = [d for _, d, _ in getattr(launcher, "scratch_specs", ())]
    scratch = [(tuple(s), _torch_dtype(torch, d), held[i] if i < len(held) else d, "zeros" in fill[:1])
               for i, (s, d, *fill) in enumerate(spec.get("scratch", ()))]
    if not inputs:
        raise TorchOpError(f"kernel {spec['name']!r} has no inputs: a torch op needs at least one input tensor "
                           f"to know its device")
    if not outputs:
        raise TorchOpError(f"kernel {spec['name']!r} has no outputs: a torch op must return a tensor")
    # How CuPy holds each array (float8 as uint8 bytes: CuPy has no float8), as the launcher checks it.
    device_dtypes = [d for _, d in launcher.in_specs] + [d for _, d in launcher.out_specs]

    # Launchers that take data pointers (a program without copies) skip the CuPy views.
    run_pointers = None if getattr(launcher, "has_copies", True) else getattr(launcher, "run_pointers", None)

    library = _LIBRARIES.get(namespace)
    if library is None:
        library = _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
    library.define(f"{name}{_schema(len(inputs), len(outputs))}")
    eager = TorchEagerCall(torch, inputs, outputs, scratch, run_pointers)
    op = TorchOp(torch, getattr(getattr(torch.ops, namespace), name), eager, qualname)

    def check(tensors: tuple) -> None:
        if len(tensors) != len(inputs):
            raise TorchOpError(f"{qualname} takes {len(inputs)} tensor(s), got {len(tensors)}")
        for i, (t, (shape, dtype)) in enumerate(zip(tensors, inputs)):
            _check_tensor(torch, qualname, i, t, shape, dtype)

    def fake(*tensors: Any) -> Any:
        check(tensors)
        device = tensors[0].device
        outs = tuple(torch.empty(shape, dtype=dtype, device=device) for shape, dtype in outputs)
        return outs[0] if len(outs) == 1 else outs

    def cuda(*tensors: Any) -> Any:
        import cupy

        check(tensors)
        device = tensors[0].device
        for i, t in enumerate(tensors):
            if t.device != device:
                raise TorchOpError(f"input {i} of {qualname}: expected a tensor on {device} like input 0, "
                                   f"got one on {t.device}")
        result = eager(tensors)  # below autograd here: tensors that need grad run like any other
        if result is not None:
            return result
        outs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in outputs]
        # Contiguous tensors cross as views; others go to the launcher as they are, which refuses
        # them with its own message (expected a C-contiguous array ...).
        arrays = [cupy_view(cupy, t, device_dtypes[i]) if t.is_contiguous() else t
                  for i, t in enumerate(list(tensors) + outs)]
        with cupy.cuda.Device(device.index):
            stream = torch.cuda.current_stream(device).cuda_stream
            # Always in this process (never the isolated worker, which synchronizes): torch ops
            # must stay capturable in CUDA graphs and asynchronous on torch's stream.
            # out as one array or a tuple: the launcher's generated call takes those without a detour
            out_arrays = arrays[len(inputs):]
            out_arg = out_arrays[0] if len(out_arrays) == 1 else tuple(out_arrays)
            if scratch:
                temps = [cupy_view(cupy, (torch.zeros if zeroed else torch.empty)(shape, dtype=dtype, device=device),
                                    held_as) for shape, dtype, held_as, zeroed in scratch]
                launcher.call(tuple(arrays[: len(inputs)]), out_arg, stream, scratch=tuple(temps))
            else:
                launcher.call(tuple(arrays[: len(inputs)]), out_arg, stream)
        return outs[0] if len(outs) == 1 else tuple(outs)

    library.impl(name, cuda, "CUDA")
    torch.library.register_fake(qualname, fake, lib=library)
    _REGISTERED[qualname] = (launcher, op)
    return op


class TorchEagerCall:
    """A kernel's call on plain CUDA tensors and parameters, without the dispatcher or CuPy views: a
    few attribute compares per tensor (type, dtype, shape, contiguity, device, 16-byte alignment),
    outputs and scratch from torch's allocator, the data pointers straight to the launches on
    torch's current stream. Returns None for anything else, which then takes a path that explains
    or dispatches.

    inputs / outputs: [(shape, torch dtype)]; scratch: [(shape, torch dtype, held as, zero-filled)];
    run_pointers: the program launcher's `run_pointers` (None for programs with copies)."""

    _KEPT_STREAMS = 8  # (device, stream) pairs whose scratch buffers are kept, newest last

    def __init__(self, torch: Any, inputs: list, outputs: list, scratch: list, run_pointers: Any):
        # Plain tensors and parameters (a layer's weight): subclasses with behaviour of their own
        # (fake, functional, distributed tensors) go the way that lets them see the call.
        self._plain_types = (torch.Tensor, torch.nn.Parameter)
        self._empty = torch.empty
        self._inputs, self._outputs = [(tuple(s), d) for s, d in inputs], [(tuple(s), d) for s, d in outputs]
        self._scratch = [((torch.zeros if zeroed else torch.empty), tuple(shape), dtype)
                         for shape, dtype, _, zeroed in scratch]
        self._run = run_pointers
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # an int: ~2 us less than a Stream object
        self._raw_stream = raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream)
        self._grad_enabled = torch.is_grad_enabled
        self._capturing = torch.cuda.is_current_stream_capturing
        self._kept: dict[tuple[int, int], tuple[list, list[int]]] = {}  # (device, stream) -> (tensors, pointers)
        self._current_device = None  # CuPy's getDevice, bound on first use (CuPy imports late)
        self.usable = run_pointers is not None and bool(inputs) and all(d is not None for _, d in inputs + outputs)

    def __call__(self, tensors: tuple, refuse_grad: bool = False) -> Any:
        """The outputs, or None unless every tensor matches exactly and sits on the current device
        (and, with `refuse_grad`, none needs grad while grad mode is on)."""
        if not self.usable or len(tensors) != len(self._inputs):
            return None
        index = tensors[0].get_device()
        current = self._current_device
        if current is None:
            import cupy

            current = self._current_device = cupy.cuda.runtime.getDevice
        if index < 0 or index != current():
            return None
        plain, needs_grad = self._plain_types, refuse_grad and self._grad_enabled()
        pointers = []
        for t, (shape, dtype) in zip(tensors, self._inputs):
            if (type(t) not in plain or t.dtype is not dtype or t.shape != shape or not t.is_contiguous()
                    or t.get_device() != index or (needs_grad and t.requires_grad)):
                return None
            pointer = t.data_ptr()
            if pointer & 15:
                return None
            pointers.append(pointer)
        device, empty = tensors[0].device, self._empty
        outs = [empty(shape, dtype=dtype, device=device) for shape, dtype in self._outputs]
        pointers += [o.data_ptr() for o in outs]
        stream = self._raw_stream(index)
        if self._scratch:
            self._run(pointers, index, stream, self._scratch_pointers(index, stream, device))
        else:
            self._run(pointers, index, stream)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def reshaped(self, input_shapes: list, output_shapes: list) -> TorchEagerCall:
        """The same call on tensors of these shapes (the caller checked that the element counts
        match): the kernel reads pointers, so only the checks and the outputs' shapes change. The
        kept scratch buffers are shared (the same kernel on the same stream)."""
        other = copy.copy(self)
        other._inputs = [(tuple(s), d) for s, (_, d) in zip(input_shapes, self._inputs)]
        other._outputs = [(tuple(s), d) for s, (_, d) in zip(output_shapes, self._outputs)]
        return other

    def _scratch_pointers(self, index: int, stream: int, device: Any) -> list[int]:
        """The scratch buffers' pointers for a launch on (index, stream): kept ones outside graph
        capture (allocated, and zero-filled where declared, on first use), fresh ones inside."""
        capturing = self._capturing()
        kept = None if capturing else self._kept.get((index, stream))
        if kept is None:
            temps = [make(shape, dtype=dtype, device=device) for make, shape, dtype in self._scratch]
            kept = (temps, [t.data_ptr() for t in temps])
            if not capturing:
                if len(self._kept) >= self._KEPT_STREAMS:
                    del self._kept[next(iter(self._kept))]  # the oldest stream's
                self._kept[(index, stream)] = kept
        return kept[1]


class TorchOp:
    """A registered kernel op: `op(*tensors)` returns the output(s); every attribute of
    `torch.ops.namespace.name` (`.default`, `.overloads()`, ...) reads through. In plain eager
    mode on tensors matching the signature exactly, the call skips torch's dispatcher and runs
    the op's own CUDA implementation directly (same outputs, allocator, stream and scratch);
    everything else goes through the dispatcher, where torch sees the op: torch.compile tracing,
    dispatch and function modes, functorch transforms, tensors that need grad (so autograd
    reports the op has no derivative), subclasses, other devices, and mismatches to explain."""

    def __init__(self, torch: Any, packet: Any, eager: TorchEagerCall, qualname: str = ""):
        self.packet, self.eager, self.qualname = packet, eager, qualname
        c = torch._C
        self._compiling = torch.compiler.is_compiling
        # torch's own "someone else wants to see this call" switches; absent ones read as off
        self._dispatch_modes = getattr(c, "_len_torch_dispatch_stack", lambda: 0)
        self._function_modes = getattr(c, "_is_torch_function_mode_enabled", lambda: False)
        self._transforms = getattr(getattr(c, "_functorch", None), "peek_interpreter_stack", lambda: None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["packet"], name)

    def __repr__(self) -> str:
        return f"TorchOp({self.packet!r})"

    def __call__(self, *tensors: Any) -> Any:
        if self._seen_by_torch():
            return self.packet(*tensors)
        result = self.eager(tensors, refuse_grad=True)
        return self.packet(*tensors) if result is None else result

    def _seen_by_torch(self) -> bool:
        """Whether something in torch wants to see this call (tracing, a mode, a transform)."""
        return bool(self._compiling() or self._dispatch_modes() or self._function_modes()
                    or self._transforms() is not None)

    def reshaped(self, input_shapes: Any, output_shapes: Any) -> ReshapedTorchOp:
        """This op over inputs and outputs of other shapes holding the same number of elements
        (a Linear's (batch, tokens, k) input for a kernel of (batch * tokens, k) rows); returns
        a callable `(*inputs) -> output(s)` of those shapes.

        In plain eager mode on matching contiguous tensors the kernel runs on their memory as it
        is (no reshape on either side); everything else reshapes to the kernel's shapes and calls
        this op, so torch.compile, modes and mismatches behave as they do there."""
        kernel_inputs = [shape for shape, _ in self.eager._inputs]
        kernel_outputs = [shape for shape, _ in self.eager._outputs]
        given = {"input_shapes": input_shapes, "output_shapes": output_shapes}
        shapes = {}
        for arg, kernel_shapes in (("input_shapes", kernel_inputs), ("output_shapes", kernel_outputs)):
            value = given[arg]
            try:
                listed = [tuple(int(d) for d in shape) for shape in value]
            except (TypeError, ValueError):
                raise TorchOpError(f"{arg} of {self.qualname}.reshaped: expected one shape (a tuple of ints) per "
                                   f"{arg.split('_')[0]}, got {value!r}") from None
            if len(listed) != len(kernel_shapes):
                raise TorchOpError(f"{arg} of {self.qualname}.reshaped: expected {len(kernel_shapes)} shape(s), "
                                   f"one per {arg.split('_')[0]} of the kernel, got {len(listed)}")
            for i, (shape, kernel_shape) in enumerate(zip(listed, kernel_shapes)):
                if math.prod(shape) != math.prod(kernel_shape) or any(d < 0 for d in shape):
                    raise TorchOpError(f"{arg}[{i}] of {self.qualname}.reshaped: expected a shape of "
                                       f"{math.prod(kernel_shape)} elements, as the kernel's {kernel_shape}, "
                                       f"got {shape}")
            shapes[arg] = listed
        return ReshapedTorchOp(self, shapes["input_shapes"], shapes["output_shapes"], kernel_inputs)


class ReshapedTorchOp:
    """A TorchOp over other shapes of the same memory (`TorchOp.reshaped`)."""

    def __init__(self, op: TorchOp, input_shapes: list, output_shapes: list, kernel_inputs: list):
        self.op, self.input_shapes, self.output_shapes = op, input_shapes, output_shapes
        self._kernel_inputs = kernel_inputs
        self._eager = op.eager.reshaped(input_shapes, output_shapes)

    def __repr__(self) -> str:
        return f"ReshapedTorchOp({self.op.qualname}, inputs {self.input_shapes}, outputs {self.output_shapes})"

    def __call__(self, *tensors: Any) -> Any:
        op = self.op
        if not op._seen_by_torch():
            result = self._eager(tensors, refuse_grad=True)
            if result is not None:
                return result
        return self._through_op(tensors)

    def _through_op(self, tensors: tuple) -> Any:
        """Reshape to the kernel's shapes, call the op (which dispatches, or explains), reshape back."""
        if len(tensors) != len(self.input_shapes):
            return self.op(*tensors)  # its count error
        flat = []
        for i, (t, shape, kernel_shape) in enumerate(zip(tensors, self.input_shapes, self._kernel_inputs)):
            got = tuple(getattr(t, "shape", ()))
            if got != shape:
                raise TorchOpError(f"input {i} of {self.op.qualname} (reshaped): expected shape {shape}, got {got}")
            flat.append(t.reshape(kernel_shape))
        result = self.op(*flat)
        outs = (result,) if len(self.output_shapes) == 1 else result
        shaped = tuple(out.reshape(shape) for out, shape in zip(outs, self.output_shapes))
        return shaped[0] if len(shaped) == 1 else shaped
