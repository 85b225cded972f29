"""Export a compiled kernel to a plain Python module that needs neither MLIR nor mgpu_lab.

The module holds the cubin (and the PTX, which the driver compiles on GPUs the cubin does not
run on), the launch description, and the launcher: the source of `runtime/portable.py` (and,
for TMA kernels, of `runtime/tma_descriptor.py`) copied in verbatim, so the exported kernel
checks its arguments and launches exactly as `Kernel.__call__` does. It imports only numpy,
CuPy, cuda-bindings (and ml_dtypes for bf16/fp8 arrays).
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
import pprint
import re
import zlib
from pathlib import Path
from typing import Any

from .compiler.compiled_kernel import CompiledKernel

_HEADER = '''"""{name}: a Hopper kernel exported by mgpu_lab {version} ({target}, grid {grid}, block {block}).

    import {module}
    out = {module}.{name}(*inputs)          # CuPy arrays (or DLPack / CUDA array interface)

Inputs: {inputs}
Outputs: {outputs}
Needs numpy, cupy and cuda-bindings only. Generated file: do not edit.
"""
'''


def _pack(data: bytes) -> str:
    encoded = base64.b64encode(zlib.compress(data, 9)).decode()
    return "\n".join(encoded[i:i + 100] for i in range(0, len(encoded), 100))


def _strip_module_header(source: str) -> str:
    """Drop a module's docstring and `from __future__` line so sources can be concatenated."""
    source = re.sub(r'^"""(.*?)"""\n', "", source, count=1, flags=re.S)
    return source.replace("from __future__ import annotations\n", "")


def export_source(compiled: CompiledKernel, module_name: str = "kernel") -> str:
    """The text of the exported module for `compiled`."""
    from . import __version__
    from .runtime import portable
    from .runtime.launcher import launch_spec

    spec = launch_spec(compiled)
    cubin, ptx = spec.pop("cubin"), spec.pop("ptx")
    parts = [
        _HEADER.format(name=compiled.name, version=__version__, target=compiled.target, grid=compiled.grid,
                       block=compiled.block, module=module_name,
                       inputs=", ".join(f"{tuple(s.shape)} {s.dtype}" for s in compiled.inputs) or "none",
                       outputs=", ".join(f"{tuple(s.shape)} {s.dtype}" for s in compiled.outputs)),
        "from __future__ import annotations\n\nimport base64 as _base64\nimport zlib as _zlib\n",
        "# ---- launcher core: mgpu_lab/runtime/portable.py, verbatim ----",
        _strip_module_header(inspect.getsource(portable)),
    ]
    tma = "None"
    if compiled.tma_descriptors:
        from .runtime import tma_descriptor

        parts += ["# ---- TMA descriptor encoding: mgpu_lab/runtime/tma_descriptor.py, verbatim ----",
                  _strip_module_header(inspect.getsource(tma_descriptor))]
        descriptors = [dataclasses.asdict(d) for d in compiled.tma_descriptors]
        parts.append(f"_TMA_DESCRIPTORS = {pprint.pformat(descriptors, width=100)}")
        tma = "TmaEncoder.from_dicts(_TMA_DESCRIPTORS)"
    from .runtime import torch_op

    parts += ["# ---- PyTorch custom op: mgpu_lab/runtime/torch_op.py, verbatim ----",
              _strip_module_header(inspect.getsource(torch_op))]
    parts += [
        "# ---- this kernel ----",
        f"SPEC = {pprint.pformat(spec, width=100, sort_dicts=False)}",
        f'SPEC["cubin"] = _zlib.decompress(_base64.b64decode("""\n{_pack(cubin)}\n"""))',
        f'SPEC["ptx"] = _zlib.decompress(_base64.b64decode("""\n{_pack(ptx.encode())}\n""")).decode()',
        "",
        "",
        "class LaunchArgumentError(ValueError):",
        '    """An argument does not match the kernel\'s signature."""',
        "",
        "",
        f"{compiled.name} = PortableLauncher(SPEC, error=LaunchArgumentError, tma_encoder={tma})",
        "",
        "",
        "def as_torch_op(qualname):",
        '    """Register this kernel as the torch custom op `qualname` ("namespace::name"); needs torch."""',
        f"    return register_torch_op({compiled.name}, qualname)",
        "",
        "",
        f'__all__ = ["{compiled.name}", "LaunchArgumentError", "SPEC", "as_torch_op"]',
        "",
    ]
    return "\n".join(parts)


def export(kernel: Any, path: str | Path) -> Path:
    """Write `kernel` (a Kernel or CompiledKernel) to `path` as a standalone Python module."""
    compiled = getattr(kernel, "compiled", kernel)
    if not isinstance(compiled, CompiledKernel):
        raise TypeError(f"kernel: expected an mgpu_lab Kernel or CompiledKernel, got {type(kernel).__name__}")
    path = Path(path)
    if path.suffix != ".py":
        raise ValueError(f"path: expected a .py file name, got {str(path)!r}")
    if not path.stem.isidentifier():
        raise ValueError(f"path: the module name {path.stem!r} is not a Python identifier")
    text = export_source(compiled, path.stem)
    compile(text, str(path), "exec")  # never leave a broken module behind
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path
