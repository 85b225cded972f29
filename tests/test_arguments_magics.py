"""%%mosaic NAME does not rebind what the notebook relies on, and a bad --dump folder costs one
printed line, not the kernel (CPU: the cell compiles, nothing launches)."""

from __future__ import annotations

import warnings

import pytest

IPython = pytest.importorskip("IPython")

from mgpu_lab.magics import MagicArgumentError  # noqa: E402

LINE = "{name} --grid 1 --block 128 --in a=A --out o=A"


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "mgpu_lab")
    ip.run_cell("import numpy as np\nimport mgpu_lab\nA = mgpu_lab.ShapeDtype((128,), 'float32')\nvalue = 5")
    yield ip
    InteractiveShell.clear_instance()


@pytest.mark.parametrize("name, message", [
    ("np", "%%mosaic: NAME 'np' would replace the module numpy imported in this notebook; pick another name"),
    ("mgpu_lab", "%%mosaic: NAME 'mgpu_lab' would replace the module mgpu_lab imported in this notebook"),
    ("print", "%%mosaic: NAME 'print' would shadow the builtin 'print'; pick another name"),
    ("len", "%%mosaic: NAME 'len' would shadow the builtin 'len'"),
    ("class", "%%mosaic: NAME must not be a Python keyword, got 'class'"),
])
def test_a_name_that_shadows_a_module_or_builtin_is_refused_in_one_line(shell, name, message):
    before = shell.user_ns.get(name)
    with pytest.raises(MagicArgumentError) as e:
        shell.run_cell_magic("mosaic", LINE.format(name=name), "pass\n")
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert shell.user_ns.get(name) is before


def test_replacing_another_value_warns_and_rebinding_a_kernel_does_not(shell):
    with pytest.warns(UserWarning, match=r"%%mosaic: value was 5 \(an int\); it is now the kernel"):
        shell.run_cell_magic("mosaic", LINE.format(name="value"), "pass\n")
    assert hasattr(shell.user_ns["value"], "compiled")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # re-running the cell rebinds the kernel quietly
        shell.run_cell_magic("mosaic", LINE.format(name="value"), "pass\n")


def test_dump_onto_an_existing_file_prints_one_line_and_binds_the_kernel(shell, tmp_path, capsys):
    taken = tmp_path / "taken.txt"
    taken.write_text("not a folder")
    shell.run_cell_magic("mosaic", LINE.format(name="k") + f" --dump {taken}", "pass\n")
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"%%mosaic: --dump '{taken}' could not be written") and "\n" not in out, out
    assert "k is built and bound, nothing was dumped" in out
    assert hasattr(shell.user_ns["k"], "compiled") and taken.read_text() == "not a folder"


def test_dump_into_a_folder_still_writes_the_artifacts(shell, tmp_path):
    shell.run_cell_magic("mosaic", LINE.format(name="k") + f" --dump {tmp_path / 'out'}", "pass\n")
    assert (tmp_path / "out" / "kernel.json").is_file() and (tmp_path / "out" / "k.ptx").is_file()
