"""Export a Kernel to a plain Python module that needs neither MLIR nor mgpu_lab.

The module holds the whole program (program.py's `to_dict()`: every launch with its cubin and
PTX, which the driver compiles on GPUs the cubin does not run on, the scratch buffers, the pads
and crops) and the code that runs it: the sources of `portable.py`, `streams.py`,
`program_runner.py` (and, for TMA kernels, `tma_descriptor.py`) copied in verbatim, so the
exported kernel checks its arguments and runs exactly as `Kernel.__call__` does. It imports only
numpy, CuPy, cuda-bindings (and ml_dtypes for bf16/fp8 arrays, named in its header when it has
such arrays).
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
import os
import pprint
import re
import zlib
from pathlib import Path
from typing import Any

from ..atomic_files import write_atomically
from ..compiler.compiled_kernel import CompiledKernel
from ..compiler.kernel_names import is_valid_kernel_name
from ..errors import ExportError
from ..user_errors import user_facing
from .program import Program

_HEADER = """{name}: a Hopper kernel exported by mgpu_lab {version} ({target}; {launches}).

    import {module}
    out = {module}.{name}(*inputs)          # CuPy arrays or torch tensors (or DLPack / CUDA array interface)
    op = {module}.as_torch_op("ns::{name}")  # the same as a torch custom op (needs torch)

Inputs: {inputs}
Outputs: {outputs}
Scratch (allocated by the module, per device and stream): {scratch}
Needs {needs}. Generated file: do not edit.
"""
# Names the generated module defines beside the copied launcher sources.
_OWN_NAMES = frozenset({"PROGRAM", "SPEC", "LaunchArgumentError", "as_torch_op", "_TMA_DESCRIPTORS", "_base64",
                        "_zlib", "annotations"})


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


def _exported_name(name: str, taken: set[str]) -> str:
    """The kernel's name, checked strictly: it becomes a Python identifier in generated code and
    must not rebind a name the copied launcher code uses."""
    import keyword

    if not is_valid_kernel_name(name) or keyword.iskeyword(name) or name.startswith("__"):
        raise ExportError(f"kernel name: expected an ASCII identifier that is not a Python keyword or a dunder "
                          f"name, got {name!r}; rebuild the kernel with another name=")
    if name in taken:
        raise ExportError(f"kernel name: {name!r} is a name the exported module defines itself; "
                          f"rebuild the kernel with another name=")
    return name


def _pack(data: bytes) -> str:
    encoded = base64.b64encode(zlib.compress(data, 9)).decode()
    return "\n".join(encoded[i:i + 100] for i in range(0, len(encoded), 100))


def _strip_module_header(source: str) -> str:
    """Drop a module's docstring, its `from __future__` line and its imports of sibling files
    (whose sources come before it in the exported module) so sources can be concatenated."""
    source = re.sub(r'^"""(.*?)"""\n', "", source, count=1, flags=re.S)
    source = re.sub(r"^from \.[\w.]* import .*\n", "", source, flags=re.M)
    return source.replace("from __future__ import annotations\n", "")


def _program_of(kernel: Any) -> Program:
    """The program a Kernel runs, or the single-launch program of a CompiledKernel."""
    if isinstance(kernel, Program):
        return kernel
    program = getattr(kernel, "program", None)
    if isinstance(program, Program):
        return program
    if isinstance(kernel, CompiledKernel):
        return Program.single(kernel)
    raise TypeError(f"kernel: expected an mgpu_lab Kernel or CompiledKernel, got {type(kernel).__name__}")


def _needs(program_dict: dict) -> str:
    """The packages the exported module imports, ml_dtypes only where an array needs it."""
    from .portable import ML_DTYPES

    arrays = program_dict["inputs"] + program_dict["outputs"] + [s[:2] for s in program_dict["scratch"]]
    arrays += [a for launch in program_dict["launches"] for a in launch["inputs"] + launch["outputs"]]
    ml = sorted({dtype for _, dtype in arrays if dtype in ML_DTYPES})
    return "numpy, cupy and cuda-bindings" + (f", and ml_dtypes (for {', '.join(ml)})" if ml else "") + \
        "; as_torch_op needs torch"


def _describe_arrays(arrays: Any) -> str:
    return ", ".join(f"{tuple(shape)!r} {dtype!r}" for shape, dtype, *_ in arrays) or "none"


def export_source(kernel: Any, module_name: str = "kernel") -> str:
    """The text of the exported module for `kernel` (a Kernel, or a CompiledKernel)."""
    from ..version import __version__
    from . import portable, program_runner, streams, torch_op

    if not module_name.isidentifier():
        raise ExportError(f"module_name: expected a Python identifier, got {module_name!r}")
    program = _program_of(kernel)
    launches = program.launches
    sources = [("portable.py", portable), ("streams.py", streams), ("program_runner.py", program_runner)]
    if any(launch.compiled.tma_descriptors for launch in launches):
        from . import tma_descriptor

        sources.append(("tma_descriptor.py", tma_descriptor))
    sources.append(("torch_op.py", torch_op))
    code = [part for file, module in sources
            for part in (f"# ---- mgpu_lab/runtime/{file}, verbatim ----", _strip_module_header(inspect.getsource(module)))]
    name = _exported_name(program.name, _OWN_NAMES | _top_level_names("\n".join(code)))
    spec = program.to_dict()
    binaries = [(launch.pop("cubin"), launch.pop("ptx")) for launch in spec["launches"]]
    tma = {i: [dataclasses.asdict(d) for d in launch.compiled.tma_descriptors]
           for i, launch in enumerate(launches) if launch.compiled.tma_descriptors}
    # Every string below reaches generated code: the name and module name as checked
    # identifiers, everything else through repr() (pformat) or a docstring that cannot be closed.
    main = program.main
    header = _docstring(_HEADER.format(
        name=name, version=__version__, target=repr(main.target), module=module_name,
        launches="; ".join(f"{l.compiled.name!r} grid {l.compiled.grid!r} block {l.compiled.block!r}" for l in launches),
        inputs=_describe_arrays(spec["inputs"]), outputs=_describe_arrays(spec["outputs"]),
        scratch=_describe_arrays(spec["scratch"]), needs=_needs(spec)))
    parts = [
        header,
        "from __future__ import annotations\n\nimport base64 as _base64\nimport zlib as _zlib\n",
        *code,
        "# ---- this kernel's program ----",
        f"PROGRAM = {pprint.pformat(spec, width=100, sort_dicts=False)}",
    ]
    for i, (cubin, ptx) in enumerate(binaries):
        parts += [f'PROGRAM["launches"][{i}]["cubin"] = _zlib.decompress(_base64.b64decode("""\n{_pack(cubin)}\n"""))',
                  f'PROGRAM["launches"][{i}]["ptx"] = _zlib.decompress(_base64.b64decode("""\n{_pack(ptx.encode())}\n""")).decode()']
    encoders = "{" + ", ".join(f"{i}: TmaEncoder.from_dicts(_TMA_DESCRIPTORS[{i}])" for i in tma) + "}"
    parts += [
        f"_TMA_DESCRIPTORS = {pprint.pformat(tma, width=100)}" if tma else "",
        "SPEC = PROGRAM  # the name modules exported by mgpu_lab 0.1 had",
        "",
        "",
        "class LaunchArgumentError(ValueError):",
        '    """An argument does not match the kernel\'s signature."""',
        "",
        "",
        f"{name} = ProgramLauncher(PROGRAM, error=LaunchArgumentError, tma_encoders={encoders})",
        "",
        "",
        "def as_torch_op(qualname):",
        '    """Register this kernel as the torch custom op `qualname` ("namespace::name"): every launch on torch\'s',
        '    current stream, outputs and scratch buffers from torch\'s allocator. Needs torch."""',
        f"    return register_torch_op({name}, qualname)",
        "",
        "",
        f'__all__ = [{name!r}, "LaunchArgumentError", "PROGRAM", "SPEC", "as_torch_op"]',
        "",
    ]
    return "\n".join(parts)


_SHADOWED_HINT = "pick another file name, e.g. {stem}_kernel.py"


def _check_module_name(path: Path) -> None:
    """Refuse a module name that would shadow something its folder imports: a keyword, a
    builtin, a dunder name, or a module already importable (numpy.py would break `import numpy`
    for every script in its folder, including the exported module itself)."""
    import builtins
    import importlib.util
    import keyword
    import sys

    stem = path.stem
    hint = _SHADOWED_HINT.format(stem=stem.strip("_") or "exported")
    if not stem.isidentifier() or keyword.iskeyword(stem):
        raise ExportError(f"path: the module name {stem!r} is not a Python identifier that can be imported; {hint}")
    if stem.startswith("__") or hasattr(builtins, stem):
        raise ExportError(f"path: the module name {stem!r} is a builtin or dunder name; {hint}")
    shadowed = stem in sys.stdlib_module_names or stem in sys.builtin_module_names
    if not shadowed:
        try:
            spec = importlib.util.find_spec(stem)
        except (ImportError, ValueError):
            spec = None
        # the file being replaced (overwrite=True) is not another module
        shadowed = spec is not None and not (spec.origin and Path(spec.origin).resolve() == path.resolve())
    if shadowed:
        raise ExportError(f"path: the module name {stem!r} would shadow the installed module {stem!r} for every "
                          f"script in its folder; {hint}")


@user_facing
def export(kernel: Any, path: str | Path, overwrite: bool = False) -> Path:
    """Write `kernel` (a Kernel, whatever its program holds, or a CompiledKernel) to `path` as a
    standalone Python module that runs its whole program.

    An existing file is replaced only with overwrite=True. The module is written to a
    temporary file beside `path` and renamed over it, so a failure leaves nothing behind."""
    program = _program_of(kernel)
    if not isinstance(path, (str, os.PathLike)):
        raise ExportError(f"path: expected a str or os.PathLike naming a .py file, got {type(path).__name__} {path!r}")
    path = Path(path)
    if path.suffix != ".py":
        raise ExportError(f"path: expected a .py file name, got {str(path)!r}")
    _check_module_name(path)
    if path.exists() and not overwrite:
        raise ExportError(f"path: {str(path)!r} already exists; pass overwrite=True to replace it")
    if not path.parent.is_dir():
        raise ExportError(f"path: the folder {str(path.parent)!r} does not exist")
    text = export_source(program, path.stem)
    compile(text, str(path), "exec")  # never leave a broken module behind
    write_atomically(path, text.encode())
    return path
