"""Launches a CompiledKernel: the portable launcher core plus profiler-trace decoding."""

from __future__ import annotations

from typing import Any

from ..compiler.compiled_kernel import CompiledKernel
from ..errors import LaunchArgumentError, ResourceLimitError
from .portable import PortableLauncher


def launch_spec(compiled: CompiledKernel) -> dict:
    """The plain-data description PortableLauncher (and exported modules) work from."""
    return {
        "name": compiled.name, "grid": list(compiled.grid), "block": list(compiled.block),
        "cluster": list(compiled.cluster), "dynamic_smem": compiled.dynamic_smem_bytes,
        "static_smem": compiled.resources.static_smem_bytes,
        "inputs": [(list(s.shape), s.dtype) for s in compiled.inputs],
        "outputs": [(list(s.shape), s.dtype) for s in compiled.outputs],
        "params": [(p.kind, p.index) for p in compiled.params],
        "cubin": compiled.cubin, "ptx": compiled.ptx,
        "profile_words": compiled.profiler.words_per_block if compiled.profiler else None,
    }


class Launcher(PortableLauncher):
    """Callable wrapper of one CompiledKernel on CuPy's current device and stream."""

    def __init__(self, compiled: CompiledKernel):
        tma = None
        if compiled.tma_descriptors:
            from .tma_descriptor import TmaEncoder

            tma = TmaEncoder(compiled.tma_descriptors)
        super().__init__(launch_spec(compiled), error=LaunchArgumentError, resource_error=ResourceLimitError,
                         tma_encoder=tma)
        self.compiled = compiled

    @property
    def last_trace(self) -> Any:
        """The decoded profiler Trace of the last call (synchronizes with its stream)."""
        if self.last_profile is None:
            return None
        from ..profiler.decode import decode_buffer

        return decode_buffer(self.last_profile.get(), self.compiled.profiler, self.compiled.name)
