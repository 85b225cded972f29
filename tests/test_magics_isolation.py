"""`%%mosaic --isolate` and `%mosaic_config isolate=on|off` in a headless IPython shell."""

from __future__ import annotations

import pytest

IPython = pytest.importorskip("IPython")

from mgpu_lab.magics import MagicArgumentError, parse_config_line, parse_magic_line  # noqa: E402
from mgpu_lab.runtime.isolation import SETTINGS  # noqa: E402

from test_magics import CELL, shell  # noqa: E402, F401 - the headless shell fixture


@pytest.fixture(autouse=True)
def _isolation_off_afterwards():
    yield
    SETTINGS.enabled = False


def test_isolate_flag_parses():
    assert parse_magic_line("k --grid 4 --block 256 --isolate").isolate
    assert not parse_magic_line("k --grid 4 --block 256").isolate


def test_mosaic_isolate_marks_the_kernel(shell):
    line = "--grid 'N // 1024' --block 256 --in a=sd --in b=sd --out out=sd"
    shell.run_cell_magic("mosaic", f"vadd {line} --isolate", CELL)
    assert shell.user_ns["vadd"].isolate is True
    shell.run_cell_magic("mosaic", f"vadd2 {line}", CELL)
    assert shell.user_ns["vadd2"].isolate is None  # follows the notebook-wide switch


def test_mosaic_config_switches_isolation_for_the_notebook(shell, capsys):
    shell.run_line_magic("mosaic_config", "isolate=on")
    assert SETTINGS.enabled and "isolate=on" in capsys.readouterr().out
    shell.run_line_magic("mosaic_config", "isolate=off")
    assert not SETTINGS.enabled


@pytest.mark.parametrize("line, message", [
    ("isolate", "expected key=value with a key of: isolate=on|off"),
    ("speed=fast", "got 'speed=fast'"),
    ("isolate=maybe", "isolate takes on or off, got 'maybe'"),
])
def test_bad_config_lines_are_named(line, message):
    with pytest.raises(MagicArgumentError, match=message):
        parse_config_line(line)
