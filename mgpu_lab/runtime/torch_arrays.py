"""Torch tensors on the launcher's CuPy path: views of their memory and outputs from torch's
allocator, so that a call with torch tensors returns torch tensors without copies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .torch_op import cupy_view


def cupy_views(tensors: Sequence[Any], declared: Sequence[str], specs: Sequence[tuple]) -> list:
    """CuPy views of contiguous CUDA tensors whose dtype is the declared one (`declared`: dtype
    names; `specs`: (shape, the dtype CuPy holds it as, float8 as bytes)); anything else passes
    through unchanged for the launcher to explain."""
    import cupy

    views = []
    for i, t in enumerate(tensors):
        usable = (i < len(specs) and getattr(t, "is_cuda", False) and t.is_contiguous()
                  and str(t.dtype).removeprefix("torch.") == declared[i])
        views.append(cupy_view(cupy, t, specs[i][1]) if usable else t)
    return views


def torch_outputs(torch: Any, specs: Sequence[Any], device: Any) -> list:
    """Empty torch tensors of the program's outputs (ArraySpec: shape, dtype) on `device`."""
    outs = []
    for spec in specs:
        dtype = getattr(torch, spec.dtype, None)
        if dtype is None:
            raise TypeError(f"output dtype {spec.dtype!r} has no torch dtype in torch {torch.__version__}")
        outs.append(torch.empty(tuple(spec.shape), dtype=dtype, device=device))
    return outs


class TorchFastPath:
    """A Kernel's call on torch tensors without CuPy views: a few attribute compares per tensor
    (type, dtype, shape, contiguity, device, 16-byte alignment), outputs from torch's allocator,
    the data pointers straight to the launches on torch's current stream. Returns None for
    anything else (other devices, `out=`, layouts, programs with copies), which then takes the
    explaining path."""

    def __init__(self, torch: Any, program: Any, launcher: Any):
        import cupy

        def specs(arrays: Sequence[Any]) -> list:
            return [(tuple(s.shape), getattr(torch, s.dtype, None)) for s in arrays]

        self.ins, self.outs = specs(program.inputs), specs(program.outputs)
        self.usable = (not launcher.has_copies and all(d is not None for _, d in self.ins + self.outs)
                       and bool(self.ins))
        self.tensor, self.empty = torch.Tensor, torch.empty
        # torch.cuda.current_stream() builds a Stream object (~2 us); the raw handle is what we need
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self.raw_stream = raw if raw is not None else (lambda index: torch.cuda.current_stream(index).cuda_stream)
        self.current_device = cupy.cuda.runtime.getDevice
        self.run = launcher.run_pointers

    def __call__(self, args: tuple) -> Any:
        if not self.usable or len(args) != len(self.ins):
            return None
        index = args[0].get_device()
        if index < 0 or index != self.current_device():
            return None
        tensor = self.tensor
        pointers = []
        for x, (shape, dtype) in zip(args, self.ins):
            if type(x) is not tensor or x.dtype is not dtype or x.shape != shape or not x.is_contiguous() \
                    or x.get_device() != index:
                return None
            pointer = x.data_ptr()
            if pointer & 15:
                return None
            pointers.append(pointer)
        device = args[0].device
        outs = [self.empty(shape, dtype=dtype, device=device) for shape, dtype in self.outs]
        pointers += [o.data_ptr() for o in outs]
        self.run(pointers, index, self.raw_stream(index))
        return outs[0] if len(outs) == 1 else tuple(outs)
