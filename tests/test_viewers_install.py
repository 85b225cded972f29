"""A Jupyter-first install: `pip install mgpu_lab` brings the viewers' stack and JupyterLab;
`mgpu_lab[notebook]` still resolves; the license is the SPDX string (no setuptools
deprecation warning on every install)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_notebook_stack_is_in_the_default_dependencies() -> None:
    default = _names(PYPROJECT["project"]["dependencies"])
    assert {"anywidget", "ipywidgets", "ipython", "matplotlib", "perfetto", "protobuf", "jupyterlab"} <= default


def test_notebook_extra_is_kept_as_an_alias() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert "jupyterlab" in _names(extras["notebook"])
    assert "mgpu_lab[notebook]" in extras["dev"]


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    [setuptools] = [r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    assert int(re.search(r">=(\d+)", setuptools).group(1)) >= 77  # the first to read the string form
