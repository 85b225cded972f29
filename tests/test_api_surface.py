"""The public API is what docs/api.md says it is (CPU only).

For every module documented there: the documented names are exactly its `__all__`, each name
imports, each public function and class has a docstring of its own. Every deprecated name
listed warns with a DeprecationWarning that names its replacement, and every shim module in
the package is listed."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"
DEPRECATED_HEADING = "Deprecated names"

# The modules issue 27 declares public: a section of docs/api.md must not silently disappear.
REQUIRED_MODULES = {
    "mgpu_lab", "mgpu_lab.dsl", "mgpu_lab.kernels", "mgpu_lab.kernels.gemm", "mgpu_lab.kernels.attention",
    "mgpu_lab.examples", "mgpu_lab.examples.vector_add", "mgpu_lab.examples.tiled_copy",
    "mgpu_lab.examples.block_sum", "mgpu_lab.examples.softmax", "mgpu_lab.examples.scaled_add",
    "mgpu_lab.examples.torch_mlp", "mgpu_lab.widgets", "mgpu_lab.tuning", "mgpu_lab.bench", "mgpu_lab.errors",
    "mgpu_lab.runtime", "mgpu_lab.profiler",
}

_HEADING = re.compile(r"^## (.+?)\s*$")
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$")
_CODE = re.compile(r"`([^`]+)`")


def parse_api_doc(text: str) -> tuple[dict[str, list[tuple[str, str]]], list[tuple[str, str]]]:
    """({module: [(name, description)]}, [(old name, replacement)]) from docs/api.md's tables.

    A module section is a `## `module`` heading; its table rows are "| `name` | description |".
    The deprecated section's rows are "| `old` | `replacement` ... | removed in |"."""
    modules: dict[str, list[tuple[str, str]]] = {}
    deprecated: list[tuple[str, str]] = []
    section: str | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            title = heading.group(1)
            code = _CODE.fullmatch(title)
            section = code.group(1) if code else title
            if code:
                modules.setdefault(section, [])
            continue
        row = _ROW.match(line)
        if not row or section is None:
            continue
        name, rest = row.group(1), row.group(2)
        if section == DEPRECATED_HEADING:
            replacement = _CODE.search(rest)
            assert replacement, f"deprecated row {name!r} names no replacement in backquotes"
            deprecated.append((name, replacement.group(1)))
        elif section in modules:
            description = rest.split("|")[0].strip()
            modules[section].append((name, description))
    return modules, deprecated


MODULES, DEPRECATED = parse_api_doc(API_DOC.read_text())


def _resolve(module: types.ModuleType, name: str) -> Any:
    """`from module import name`: an attribute, or a submodule of a package."""
    try:
        return getattr(module, name)
    except AttributeError:
        if not hasattr(module, "__path__"):
            raise
        return importlib.import_module(f"{module.__name__}.{name}")


def _own_docstring(obj: Any) -> str:
    """The object's own docstring ('' for a class that only inherits one or a dataclass's
    generated `Name(field: type, ...)` signature)."""
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__") or ""
        if doc.startswith(f"{obj.__name__}("):  # dataclasses write one when the class has none
            return ""
        return doc.strip()
    return (getattr(obj, "__doc__", None) or "").strip()


def test_doc_lists_every_public_module():
    assert REQUIRED_MODULES <= set(MODULES), f"docs/api.md lacks {sorted(REQUIRED_MODULES - set(MODULES))}"
    assert DEPRECATED, "docs/api.md has no deprecated-names table"


@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_documented_names_are_the_modules_all(module_name: str):
    module = importlib.import_module(module_name)
    documented = [name for name, _ in MODULES[module_name]]
    assert len(documented) == len(set(documented)), f"{module_name}: a name is documented twice"
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module_name} declares no __all__"
    assert len(exported) == len(set(exported)), f"{module_name}.__all__ lists a name twice"
    assert set(documented) == set(exported), (
        f"{module_name}: documented but not in __all__: {sorted(set(documented) - set(exported))}; "
        f"in __all__ but not documented: {sorted(set(exported) - set(documented))}")
    for name, description in MODULES[module_name]:
        assert description, f"{module_name}.{name} has no description in docs/api.md"


@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_every_public_name_imports_and_has_a_docstring(module_name: str):
    module = importlib.import_module(module_name)
    assert _own_docstring(module), f"{module_name} has no module docstring"
    undocumented = []
    for name in module.__all__:
        obj = _resolve(module, name)
        if (inspect.isfunction(obj) or inspect.isclass(obj)) and not _own_docstring(obj):
            undocumented.append(name)
    assert not undocumented, f"{module_name}: public functions/classes without a docstring: {undocumented}"


def _untyped(function: Any) -> list[str]:
    """The parameters (and 'return') of a function that carry no annotation (*args/**kwargs aside)."""
    signature = inspect.signature(function)
    missing = [p.name for p in signature.parameters.values()
               if p.annotation is inspect.Parameter.empty and p.name not in ("self", "cls")
               and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if function.__name__ != "__init__" and signature.return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


@pytest.mark.parametrize("module_name", sorted(MODULES))
def test_public_functions_have_type_hints(module_name: str):
    module = importlib.import_module(module_name)
    untyped = {}
    for name in module.__all__:
        obj = _resolve(module, name)
        function = obj.__dict__.get("__init__") if inspect.isclass(obj) else obj
        if inspect.isfunction(function) and _untyped(function):
            untyped[name] = _untyped(function)
    assert not untyped, f"{module_name}: public functions without type hints: {untyped}"


def test_light_modules_do_not_load_mlir():
    code = ("import sys, mgpu_lab, mgpu_lab.runtime, mgpu_lab.profiler, mgpu_lab.errors, mgpu_lab.bench; "
            "print(sorted(m for m in sys.modules if m == 'mlir' or m.startswith('mlir.') or m == 'mgpu_lab._mlir'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"a light module loads MLIR: {out.stdout}"


def _public_names(module: types.ModuleType) -> list[str]:
    """A module's `__all__`, else the names it defines itself (not ones it imports)."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ != module.__name__:
            continue
        names.append(name)
    return names


def _deprecation_messages(read: Any) -> list[str]:
    """The DeprecationWarning messages `read()` raised (exceptions after the warning are ignored)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            read()
        except AttributeError:
            raise
        except Exception:  # noqa: BLE001 - an instance built without __init__ may fail after warning
            pass
    return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]


def _split_importable(path: str) -> tuple[types.ModuleType, list[str]]:
    """The longest importable module prefix of a dotted path, and the attributes after it."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                return importlib.import_module(".".join(parts[:cut])), parts[cut:]
        except ModuleNotFoundError:
            continue
    raise AssertionError(f"nothing of {path!r} imports")


@pytest.mark.parametrize("old,replacement", DEPRECATED, ids=[old for old, _ in DEPRECATED])
def test_deprecated_name_warns_naming_its_replacement(old: str, replacement: str):
    module, rest = _split_importable(old)
    if not rest:  # a moved module: every name of its new home that it still serves warns
        new = importlib.import_module(replacement)
        read = []
        for name in _public_names(new):
            try:
                messages = _deprecation_messages(lambda name=name: getattr(module, name))
            except AttributeError:
                continue  # not every name of the new home existed at the old path
            read.append(name)
            assert any(f"{old}.{name}" in m and replacement in m and "0.3" in m for m in messages), (
                f"{old}.{name} warned {messages}, not naming {replacement}")
        assert read, f"{old} serves none of {replacement}'s names"
        return
    owner: Any = module
    for attr in rest[:-1]:
        owner = getattr(owner, attr)
    last = rest[-1]
    if inspect.isclass(owner) and isinstance(inspect.getattr_static(owner, last), property):
        owner = owner.__new__(owner)  # a deprecated property warns on an instance
    messages = _deprecation_messages(lambda: getattr(owner, last))
    assert any(replacement in m and "0.3" in m for m in messages), f"{old} warned {messages}, not naming {replacement}"


def _shim_modules() -> dict[str, str]:
    """{old module path: new module path} of every module in the package whose `__getattr__`
    is a `moved_module` shim (read from the source, so nothing is imported)."""
    shims = {}
    for path in sorted((ROOT / "mgpu_lab").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__getattr__"
                                                     for t in node.targets)
                    and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", "") == "moved_module"):
                old, new = (ast.literal_eval(arg) for arg in node.value.args[:2])
                relative = path.relative_to(ROOT).with_suffix("")
                assert old == ".".join(relative.parts), f"{path} says it is {old!r}"
                shims[old] = new
    return shims


def test_every_shim_module_is_documented_as_deprecated():
    shims = _shim_modules()
    examples = {old for old in shims if old.startswith("mgpu_lab.examples.")}
    assert {"mgpu_lab.examples.gemm", "mgpu_lab.examples.attention"} <= examples
    documented = {old for old, _ in DEPRECATED}
    missing = sorted(set(shims) - documented)
    assert not missing, f"shim modules missing from docs/api.md's deprecated section: {missing}"
    for old, new in shims.items():
        replacement = dict(DEPRECATED)[old]
        assert new == replacement or new.startswith(replacement + "."), (old, new, replacement)


def test_deprecated_modules_are_not_public():
    public = {f"{module}.{name}" for module, rows in MODULES.items() for name, _ in rows}
    for old, _ in DEPRECATED:
        assert old not in MODULES and old not in public, f"{old} is both public and deprecated"


def test_old_gemm_names_still_import_with_warnings():
    with pytest.warns(DeprecationWarning) as caught:
        from mgpu_lab.examples.gemm import TILE_K, TILE_M, default_stages, gemm_smem_bytes
    from mgpu_lab.kernels.gemm import default_stages as new_default_stages
    from mgpu_lab.kernels.gemm import gemm_smem_bytes as new_gemm_smem_bytes

    assert (TILE_M, TILE_K) == (128, 64)
    assert default_stages is new_default_stages and gemm_smem_bytes is new_gemm_smem_bytes
    messages = [str(w.message) for w in caught]
    assert any("mgpu_lab.kernels.gemm.default_stages" in m for m in messages), messages
    assert any("mgpu_lab.examples.gemm.TILE_M" in m and "make_gemm" in m for m in messages), messages


def test_old_tuner_and_exporter_names_warn():
    import mgpu_lab.autotune
    import mgpu_lab.exporter
    from mgpu_lab.runtime.export import export

    with pytest.warns(DeprecationWarning, match=r"mgpu_lab\.autotune\.WrappedKernel.*mgpu_lab\.Kernel"):
        wrapped = mgpu_lab.autotune.WrappedKernel
    assert wrapped(lambda **config: config, {"n": 4}) == {"n": 4}
    with pytest.warns(DeprecationWarning, match=r"mgpu_lab\.runtime\.export\.export"):
        assert mgpu_lab.exporter.export is export
    with pytest.warns(DeprecationWarning, match=r"mgpu_lab\.tuning\.tune"):
        assert mgpu_lab.autotune.tune is mgpu_lab.tune


def test_teaching_modules_import_without_deprecation_warnings():
    code = ("import warnings; warnings.filterwarnings('error', '.*mgpu_lab', DeprecationWarning); "
            + "; ".join(f"import {m}" for m in sorted(MODULES) if m.startswith("mgpu_lab.examples")))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]


def test_version_matches_pyproject_and_changelog():
    import tomllib

    import mgpu_lab

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert mgpu_lab.__version__ == version
    assert re.search(rf"^## {re.escape(version)} \(", (ROOT / "CHANGELOG.md").read_text(), re.M), (
        f"CHANGELOG.md has no section for {version}")
