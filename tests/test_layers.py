"""The layer contract: the package's rooms form layers, and a module imports only from its own
room or from rooms below it. Every import counts, also those inside functions (which hide cycles
from Python until the day they run), relative or absolute."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mgpu_lab"

# Lowest first. A room is a subpackage of mgpu_lab or a top-level module of it.
LAYERS = [
    {"errors", "version", "atomic_files", "deprecation", "arguments"},
    {"user_errors", "_mlir"},
    {"compiler"},
    {"profiler"},
    {"runtime"},
    {"widgets"},
    {"builder", "dsl"},
    {"tuning", "bench"},
    # The package root is the public facade (its names load lazily, so it imports nothing itself):
    # library and teaching kernels use it as users do (`mgpu_lab.kernel(...)`).
    {"kernels", "examples", "__init__"},
    {"magics", "demo", "cli", "autotune", "exporter", "jupyter_server_extension"},
]
# The one upward import, with its reason: IPython looks for `load_ipython_extension` in the package
# named by `%load_ext mgpu_lab`, and it registers the magics from there, on demand.
ALLOWED = {("__init__.py", "mgpu_lab.magics")}
RANK = {room: rank for rank, rooms in enumerate(LAYERS) for room in rooms}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room_of(module: str) -> str:
    """mgpu_lab.runtime.kernel -> runtime; mgpu_lab.cli -> cli; mgpu_lab -> __init__."""
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every mgpu_lab import in the file, at any depth, resolved."""
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "mgpu_lab":  # `from mgpu_lab import dsl` names a room, `__version__` the ground
                found += [(node.lineno, f"mgpu_lab.{a.name}") if a.name in RANK or a.name == "__version__"
                          else (node.lineno, "mgpu_lab") for a in node.names]
            else:
                found.append((node.lineno, target))
    return [(line, name.replace("mgpu_lab.__version__", "mgpu_lab.version")) for line, name in found
            if name == "mgpu_lab" or name.startswith("mgpu_lab.")]


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


def test_every_room_has_a_layer():
    rooms = {room_of(_module_name(p)) for p in MODULES}
    assert rooms <= set(RANK), f"rooms without a layer in LAYERS: {sorted(rooms - set(RANK))}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    mine = room_of(_module_name(path))
    upward = [f"line {line}: {name} ({room_of(name)}, layer {RANK[room_of(name)]})"
              for line, name in imports_of(path)
              if RANK.get(room_of(name), -1) > RANK[mine]
              and (str(path.relative_to(PACKAGE)), name) not in ALLOWED]
    assert not upward, f"{path.relative_to(PACKAGE)} ({mine}, layer {RANK[mine]}) imports from above: {upward}"


def test_the_checker_sees_imports_inside_functions(tmp_path):
    """The contract must not be blind to a function-level import (how the old cycles hid)."""
    runtime = PACKAGE / "runtime" / "kernel.py"
    assert any(name == "mgpu_lab.runtime.export" for _, name in imports_of(runtime)), \
        "Kernel.export's import inside the method was not seen"


def test_the_portable_dtype_table_matches_the_compilers():
    """runtime/portable.py keeps its own copy of the dtype names (exports copy it verbatim)."""
    from mgpu_lab.compiler import dtype_names
    from mgpu_lab.runtime import portable

    assert portable.ML_DTYPES == dtype_names.ML_DTYPES
    for name in ("float32", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8", "uint16"):
        assert portable.dtype_from_name(name) == dtype_names.dtype_from_name(name)


def test_compiler_sizes_ml_dtypes_without_importing_them():
    # The compiler only needs their sizes; importing ml_dtypes took half a second of a process's
    # first kernel build. The table must agree with ml_dtypes itself.
    import subprocess
    import sys

    import ml_dtypes
    import numpy as np

    from mgpu_lab.compiler.dtype_names import ML_DTYPES, ML_ITEMSIZE
    from mgpu_lab.compiler.kernel_spec import dtype_itemsize

    assert set(ML_ITEMSIZE) == set(ML_DTYPES)
    for name in ML_DTYPES:
        assert dtype_itemsize(name) == np.dtype(getattr(ml_dtypes, name)).itemsize
    code = ("import sys; from mgpu_lab.kernels.gemm import make_gemm; "
            "make_gemm(64, 256, 256, transpose_b=True, use_cache=False, target='sm_90a'); "
            "print('ml_dtypes' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
