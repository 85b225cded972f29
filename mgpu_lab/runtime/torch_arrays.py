"""Torch tensors on the launcher's CuPy path: views of their memory and outputs from torch's
allocator, so that a call with torch tensors returns torch tensors without copies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .torch_op import TorchEagerCall, cupy_view


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


def torch_fast_path(torch: Any, program: Any, launcher: Any) -> TorchEagerCall:
    """A Kernel's call on plain torch tensors (the torch op's eager call, `TorchEagerCall`): the
    program's scratch buffers are the ones the launcher keeps per device and stream, as on the
    CuPy path; None comes back for anything it does not take, which then takes the explaining
    path."""
    def specs(arrays: Sequence[Any]) -> list:
        return [(tuple(s.shape), getattr(torch, s.dtype, None)) for s in arrays]

    run = None if launcher.has_copies else launcher.run_pointers
    return TorchEagerCall(torch, specs(program.inputs), specs(program.outputs), [], run)
