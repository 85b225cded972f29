"""mgpu_lab: write, run, profile and ship NVIDIA Hopper kernels from Python and notebooks.

    import mgpu_lab
    from mgpu_lab import dsl

    k = mgpu_lab.kernel(body, grid=..., block=..., in_shapes=..., out_shapes=...)
    y = k(x)                     # CuPy arrays or torch tensors in, the same framework out
    k.compiled.sass              # every artifact: ptx, sass, resources, smem_layout, passes
    k.program                    # what it runs: launches, scratch buffers, pads and crops

Every launchable thing (`kernel`, `%%mosaic`, the library's `make_gemm`, `make_attention`) is
a `Kernel`, and every tool takes it: `tune`, `export`, `widgets.show`, `as_torch_op`, the CLI.

`import mgpu_lab` needs no GPU and does not load MLIR; the builder loads it on first use.
"""

from __future__ import annotations

from typing import Any

from .version import __version__

# name -> (module, attribute); resolved on first access so that `import mgpu_lab` stays light.
_LAZY = {
    "kernel": ("mgpu_lab.builder.kernel", "kernel"),
    "Kernel": ("mgpu_lab.runtime.kernel", "Kernel"),
    "Program": ("mgpu_lab.runtime.program", "Program"),
    "Trace": ("mgpu_lab.profiler.trace", "Trace"),
    "ShapeDtype": ("mgpu_lab.builder.shapes", "ShapeDtype"),
    "Union": ("mgpu_lab.builder.shapes", "Union"),
    "Barriers": ("mgpu_lab.builder.shapes", "Barriers"),
    "CompileOptions": ("mgpu_lab.compiler.options", "CompileOptions"),
    "CompiledKernel": ("mgpu_lab.compiler.compiled_kernel", "CompiledKernel"),
    "dsl": ("mgpu_lab.dsl", None),
    "bench": ("mgpu_lab.bench", None),
    "tune": ("mgpu_lab.tuning", "tune"),
    "TuneResult": ("mgpu_lab.tuning.candidates", "TuneResult"),
    "to_device": ("mgpu_lab.runtime.arrays", "to_device"),
    "to_host": ("mgpu_lab.runtime.arrays", "to_host"),
    "export": ("mgpu_lab.runtime.export", "export"),
    "isolated": ("mgpu_lab.runtime.isolation", "isolated"),
    "set_isolation": ("mgpu_lab.runtime.isolation", "set_isolation"),
    "KernelFaultError": ("mgpu_lab.errors", "KernelFaultError"),
}


__all__ = sorted([*_LAZY, "__version__", "load_ipython_extension"])


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'mgpu_lab' has no attribute {name!r}")
    import importlib

    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext mgpu_lab` registers the %%mosaic magics."""
    from .magics import register

    register(ipython)
