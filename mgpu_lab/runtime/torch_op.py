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
  e.g. split-K's f32 partial sums, stream-K's zeroed flags) come from torch's allocator on every call
  too, so concurrent streams never share one and graphs capture them;
- the launcher's own checks (shape, dtype, contiguity, alignment, device) run on every call, so the
  errors read as they do on the CuPy path; the fake implementation repeats the shape and dtype
  checks, so `torch.compile` reports them while tracing.
"""

from __future__ import annotations

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

    # Launchers that take data pointers (a program without copies) skip the CuPy views; torch's raw
    # stream handle costs a fraction of torch.cuda.current_stream()'s Stream object.
    run_pointers = None if getattr(launcher, "has_copies", True) else getattr(launcher, "run_pointers", None)
    raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

    library = _LIBRARIES.get(namespace)
    if library is None:
        library = _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
    library.define(f"{name}{_schema(len(inputs), len(outputs))}")

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
        outs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in outputs]
        index = device.index
        if run_pointers is not None and raw_stream is not None and index == cupy.cuda.runtime.getDevice():
            pointers = [t.data_ptr() for t in tensors if t.is_contiguous()]
            if len(pointers) == len(tensors) and not any(p & 15 for p in pointers):
                temps = [(torch.zeros if zeroed else torch.empty)(shape, dtype=dtype, device=device)
                         for shape, dtype, _, zeroed in scratch]
                run_pointers(pointers + [o.data_ptr() for o in outs], index, raw_stream(index),
                             [t.data_ptr() for t in temps] if scratch else None)
                return outs[0] if len(outs) == 1 else tuple(outs)
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
    op = getattr(getattr(torch.ops, namespace), name)
    _REGISTERED[qualname] = (launcher, op)
    return op

