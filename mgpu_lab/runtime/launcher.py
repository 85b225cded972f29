"""Launches a CompiledKernel: the portable launcher core, isolated launches, profiler-trace decoding."""

from __future__ import annotations

from typing import Any

from ..compiler.compiled_kernel import CompiledKernel
from ..errors import LaunchArgumentError, ResourceLimitError
from .isolation import SETTINGS
from .portable import PortableLauncher


def alias_pairs(may_alias: Any, n_in: int, n_out: int) -> Any:
    """`may_alias` as the launch spec keeps it: True, or sorted [output, input] pairs.

    Accepts True/False/None, {output: input or [inputs]}, or an iterable of (output, input)."""
    if may_alias is None or may_alias is False:
        return []
    if may_alias is True:
        return True
    items = may_alias.items() if isinstance(may_alias, dict) else may_alias
    pairs = set()
    try:
        for o, inputs in items:
            for i in (inputs if isinstance(inputs, (list, tuple, set, frozenset)) else (inputs,)):
                pairs.add((o, i))
    except (TypeError, ValueError):
        raise TypeError(f"may_alias: expected True, {{output: input}} or [(output, input)] pairs, "
                        f"got {may_alias!r}") from None
    for o, i in sorted(pairs):
        if not (isinstance(o, int) and 0 <= o < n_out and isinstance(i, int) and 0 <= i < n_in):
            raise ValueError(f"may_alias: ({o!r}, {i!r}) is not an (output index < {n_out}, input index < {n_in}) pair")
    return [list(p) for p in sorted(pairs)]


def launch_spec(compiled: CompiledKernel, may_alias: Any = None) -> dict:
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
        "may_alias": alias_pairs(may_alias, len(compiled.inputs), len(compiled.outputs)),
    }


class Launcher(PortableLauncher):
    """Callable wrapper of one CompiledKernel on CuPy's current device and stream; with
    isolation on (`mgpu_lab.isolated()`, `isolate=True`) the launch runs in the GPU worker."""

    def __init__(self, compiled: CompiledKernel, may_alias: Any = None):
        tma = None
        if compiled.tma_descriptors:
            from .tma_descriptor import TmaEncoder

            tma = TmaEncoder(compiled.tma_descriptors)
        super().__init__(launch_spec(compiled, may_alias), error=LaunchArgumentError,
                         resource_error=ResourceLimitError, tma_encoder=tma)
        self.compiled = compiled
        self.isolation = SETTINGS  # the process-wide switch (mgpu_lab.isolated / set_isolation)

    def __call__(self, *args: Any, out: Any = None, stream: Any = None, isolate: bool | None = None,
                 timeout_s: float | None = None) -> Any:
        if isolate or (isolate is None and SETTINGS.enabled):
            return self.call_isolated(args, out, stream, timeout_s)
        return self.call(args, out, stream)

    def call_isolated(self, args: tuple, out: Any = None, stream: Any = None, timeout_s: float | None = None) -> Any:
        """Check the arguments here, then launch in the isolated GPU worker."""
        from .isolation import launch_isolated

        if len(args) != self.n_in:
            return self.call(args, out, stream)  # raises the argument-count error
        device = self._get_device()
        arrays, _ = self.checked(args, out, device)
        return launch_isolated(self, list(arrays), device, stream, timeout_s)

    def launch_unchecked(self, *arrays: Any, stream: Any = None, isolate: bool | None = None) -> None:
        """Launch on CuPy arrays (inputs then outputs) without any argument check (isolated
        when isolation is on)."""
        if isolate or (isolate is None and SETTINGS.enabled):
            from .isolation import launch_isolated

            launch_isolated(self, list(arrays), self._get_device(), stream)
            return
        self.unchecked(arrays, stream)

    @property
    def last_trace(self) -> Any:
        """The decoded profiler Trace of the last call (synchronizes with its stream)."""
        if self.last_profile is None:
            return None
        from ..profiler.decode import decode_buffer

        buffer = self.last_profile  # a CuPy array, or numpy when the call ran in the isolated worker
        host = buffer.get() if hasattr(buffer, "get") else buffer
        return decode_buffer(host, self.compiled.profiler, self.compiled.name)
