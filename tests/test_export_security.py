"""Export writes code other people import: nothing from a kernel may run at import, existing
files are kept, failures leave nothing behind."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
import textwrap

import pytest

from mgpu_lab.compiler.compiled_kernel import ArraySpec
from mgpu_lab.errors import ExportError
from mgpu_lab.examples.vector_add import make_vector_add
from mgpu_lab.runtime.export import export, export_source

BLOCKER = "import sys\nsys.modules['mlir'] = None\nsys.modules['mgpu_lab'] = None\n"


@pytest.fixture(scope="module")
def compiled():
    k = make_vector_add(1 << 12)
    k.compiled.sass  # noqa: B018
    return k.compiled


def _import_in_child(folder, module: str) -> subprocess.CompletedProcess:
    script = BLOCKER + f"sys.path.insert(0, {str(folder)!r})\nimport {module}\nprint('IMPORTED')\n"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def _payload(marker) -> str:
    return f'__import__("pathlib").Path({str(marker)!r}).write_text("pwned")'


@pytest.mark.parametrize("hostile", [
    'x"""\n{payload}\n"""',
    "x = 1\n{payload}\nv",
    "vector_add; {payload}",
])
def test_hostile_kernel_name_is_refused(compiled, tmp_path, hostile):
    marker = tmp_path / "pwned"
    bad = compiled.renamed(hostile.format(payload=_payload(marker)))
    with pytest.raises(ExportError, match="kernel name: expected an ASCII identifier"):
        export(bad, tmp_path / "evil.py")
    assert not marker.exists() and not (tmp_path / "evil.py").exists()


@pytest.mark.parametrize("name", ["class", "PortableLauncher", "SPEC", "np"])
def test_names_that_would_break_the_module_are_refused(compiled, tmp_path, name):
    with pytest.raises(ExportError, match="kernel name"):
        export(compiled.renamed(name), tmp_path / "k.py")


def test_hostile_strings_in_other_fields_stay_data(compiled, tmp_path):
    """Target and dtype strings reach the module's docstring and SPEC: quoted, never code."""
    marker = tmp_path / "pwned"
    payload = _payload(marker)
    spec = dataclasses.replace(
        compiled.spec, inputs=(ArraySpec((4,), f'float32"""\n{payload}\n"""'),) + compiled.inputs[1:])
    bad = dataclasses.replace(compiled, target=f'sm_90a"""\n{payload}\n"""', spec=spec,
                              disassembly=compiled.wait_disassembly())
    path = export(bad, tmp_path / "quoted.py")
    out = _import_in_child(tmp_path, "quoted")
    assert not marker.exists(), "code from a kernel field ran at import"
    # The module may refuse the odd dtype at import or call time; it must never run the payload.
    assert "pwned" not in out.stdout
    tree = ast.parse(path.read_text())
    assert repr(bad.target) in ast.get_docstring(tree)  # there, but as the text of a string literal
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "write_text"]
    assert calls == []  # nowhere as code


def test_export_does_not_overwrite_by_default(compiled, tmp_path):
    path = tmp_path / "mine.py"
    path.write_text("# my own work\n")
    with pytest.raises(ExportError, match=r"path: '.*mine.py' already exists; pass overwrite=True to replace it"):
        export(compiled, path)
    assert path.read_text() == "# my own work\n"
    export(compiled, path, overwrite=True)
    assert "ProgramLauncher(PROGRAM" in path.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.py"]


def test_export_into_a_missing_folder_is_a_clear_error(compiled, tmp_path):
    with pytest.raises(ExportError, match="path: the folder .*nowhere' does not exist"):
        export(compiled, tmp_path / "nowhere" / "k.py")


def test_failed_write_leaves_no_temp_file_and_no_empty_output(compiled, tmp_path, monkeypatch):
    import pathlib

    real_write_bytes = pathlib.Path.write_bytes

    def disk_full(self, data):
        real_write_bytes(self, data[:10])  # part of it lands, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_bytes", disk_full)
    with pytest.raises(OSError, match="No space left"):
        export(compiled, tmp_path / "k.py")
    assert list(tmp_path.iterdir()) == []


def test_exported_module_name_is_checked(compiled):
    with pytest.raises(ExportError, match="module_name: expected a Python identifier, got 'a-b'"):
        export_source(compiled, "a-b")


def test_cli_export_refuses_to_overwrite(tmp_path):
    kernels = tmp_path / "kernels.py"
    kernels.write_text(textwrap.dedent("""
        from mgpu_lab.examples.vector_add import make_vector_add
        def small():
            return make_vector_add(1 << 12)
    """))
    out = tmp_path / "out.py"
    out.write_text("keep me\n")
    from mgpu_lab.cli import main

    assert main(["export", f"{kernels}:small", str(out)]) == 2
    assert out.read_text() == "keep me\n"
    assert main(["export", f"{kernels}:small", str(out), "--overwrite"]) == 0
    assert "ProgramLauncher" in out.read_text()
