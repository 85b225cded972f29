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

from .atomic_files import write_atomically
from .compiler.compiled_kernel import CompiledKernel
from .compiler.kernel_names import is_valid_kernel_name
from .errors import ExportError
from .user_errors import user_facing

_HEADER = """{name}: a Hopper kernel exported by mgpu_lab {version} ({target}, grid {grid}, block {block}).

    import {module}
    out = {module}.{name}(*inputs)          # CuPy arrays (or DLPack / CUDA array interface)

Inputs: {inputs}
Outputs: {outputs}
Needs numpy, cupy and cuda-bindings only. Generated file: do not edit.
"""
# Names the generated module defines beside the copied launcher sources.
_OWN_NAMES = frozenset({"SPEC", "LaunchArgumentError", "as_torch_op", "_TMA_DESCRIPTORS", "_base64", "_zlib",
                        "annotations"})


def _top_level_names(source: str) -> set[str]:
    """Names a module's source binds at top level (defs, classes, assignments, imports)."""
    import ast

    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _docstring(text: str) -> str:
    """`text` as a module docstring literal that cannot end early, whatever text holds."""
    if '"""' in text or "\\" in text or text.endswith('"'):
        return repr(text)
    return f'"""{text}"""'


def _exported_name(compiled: CompiledKernel, taken: set[str]) -> str:
    """The kernel's name, checked strictly: it becomes a Python identifier in generated code and
    must not rebind a name the copied launcher code uses."""
    import keyword

    name = compiled.name
    if not is_valid_kernel_name(name) or keyword.iskeyword(name):
        raise ExportError(f"kernel name: expected an ASCII identifier that is not a Python keyword, got {name!r}")
    if name in taken:
        raise ExportError(f"kernel name: {name!r} is a name the exported module defines itself; "
                          f"rebuild the kernel with another name=")
    return name


def _pack(data: bytes) -> str:
    encoded = base64.b64encode(zlib.compress(data, 9)).decode()
    return "\n".join(encoded[i:i + 100] for i in range(0, len(encoded), 100))


def _strip_module_header(source: str) -> str:
    """Drop a module's docstring and `from __future__` line so sources can be concatenated."""
    source = re.sub(r'^"""(.*?)"""\n', "", source, count=1, flags=re.S)
    return source.replace("from __future__ import annotations\n", "")


def export_source(compiled: CompiledKernel, module_name: str = "kernel", may_alias: Any = None) -> str:
    """The text of the exported module for `compiled`."""
    from . import __version__
    from .runtime import portable, torch_op
    from .runtime.launcher import launch_spec

    if not module_name.isidentifier():
        raise ExportError(f"module_name: expected a Python identifier, got {module_name!r}")
    launcher = ["# ---- launcher core: mgpu_lab/runtime/portable.py, verbatim ----",
                _strip_module_header(inspect.getsource(portable))]
    tma = "None"
    if compiled.tma_descriptors:
        from .runtime import tma_descriptor

        launcher += ["# ---- TMA descriptor encoding: mgpu_lab/runtime/tma_descriptor.py, verbatim ----",
                     _strip_module_header(inspect.getsource(tma_descriptor))]
        descriptors = [dataclasses.asdict(d) for d in compiled.tma_descriptors]
        launcher.append(f"_TMA_DESCRIPTORS = {pprint.pformat(descriptors, width=100)}")
        tma = "TmaEncoder.from_dicts(_TMA_DESCRIPTORS)"
    launcher += ["# ---- PyTorch custom op: mgpu_lab/runtime/torch_op.py, verbatim ----",
                 _strip_module_header(inspect.getsource(torch_op))]
    name = _exported_name(compiled, _OWN_NAMES | _top_level_names("\n".join(launcher)))
    spec = launch_spec(compiled, may_alias)  # the kernel's declared output/input overlaps ship with it
    cubin, ptx = spec.pop("cubin"), spec.pop("ptx")
    # Every string below reaches generated code: the name and module name as checked
    # identifiers, everything else through repr() (pformat) or a docstring that cannot be closed.
    header = _docstring(_HEADER.format(
        name=name, version=__version__, target=repr(compiled.target), grid=repr(compiled.grid),
        block=repr(compiled.block), module=module_name,
        inputs=", ".join(f"{tuple(s.shape)!r} {s.dtype!r}" for s in compiled.inputs) or "none",
        outputs=", ".join(f"{tuple(s.shape)!r} {s.dtype!r}" for s in compiled.outputs)))
    parts = [
        header,
        "from __future__ import annotations\n\nimport base64 as _base64\nimport zlib as _zlib\n",
        *launcher,
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
        f"{name} = PortableLauncher(SPEC, error=LaunchArgumentError, tma_encoder={tma})",
        "",
        "",
        "def as_torch_op(qualname):",
        '    """Register this kernel as the torch custom op `qualname` ("namespace::name"); needs torch."""',
        f"    return register_torch_op({name}, qualname)",
        "",
        "",
        f'__all__ = [{name!r}, "LaunchArgumentError", "SPEC", "as_torch_op"]',
        "",
    ]
    return "\n".join(parts)


@user_facing
def export(kernel: Any, path: str | Path, overwrite: bool = False) -> Path:
    """Write `kernel` (a Kernel or CompiledKernel) to `path` as a standalone Python module.

    An existing file is replaced only with overwrite=True. The module is written to a
    temporary file beside `path` and renamed over it, so a failure leaves nothing behind."""
    compiled = getattr(kernel, "compiled", kernel)
    if not isinstance(compiled, CompiledKernel):
        raise TypeError(f"kernel: expected an mgpu_lab Kernel or CompiledKernel, got {type(kernel).__name__}")
    path = Path(path)
    if path.suffix != ".py":
        raise ExportError(f"path: expected a .py file name, got {str(path)!r}")
    if not path.stem.isidentifier():
        raise ExportError(f"path: the module name {path.stem!r} is not a Python identifier")
    if path.exists() and not overwrite:
        raise ExportError(f"path: {str(path)!r} already exists; pass overwrite=True to replace it")
    if not path.parent.is_dir():
        raise ExportError(f"path: the folder {str(path.parent)!r} does not exist")
    text = export_source(compiled, path.stem, getattr(kernel, "may_alias", None))
    compile(text, str(path), "exec")  # never leave a broken module behind
    write_atomically(path, text.encode())
    return path
