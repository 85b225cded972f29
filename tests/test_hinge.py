"""Everything after compilation reads CompiledKernel/Trace data: none of it may load MLIR."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mgpu_lab"
# Whole packages, so a new module in them is checked without editing this list.
AFTER_COMPILATION_PACKAGES = ("runtime", "profiler", "widgets")
AFTER_COMPILATION = sorted(
    f"mgpu_lab.{pkg}.{path.stem}" for pkg in AFTER_COMPILATION_PACKAGES
    for path in (PACKAGE / pkg).glob("*.py") if path.stem != "__init__"
)


def test_every_package_module_is_checked():
    assert "mgpu_lab.profiler.decode" in AFTER_COMPILATION and "mgpu_lab.runtime.portable" in AFTER_COMPILATION
    assert not (PACKAGE / "profiler" / "device.py").exists(), "device-side profiling lives in builder/"


@pytest.mark.parametrize("module", AFTER_COMPILATION)
def test_module_does_not_import_mlir(module):
    code = (f"import sys, importlib; importlib.import_module({module!r}); "
            "bad = sorted(m for m in sys.modules if m == 'mlir' or m.startswith('mlir.') or m == 'mgpu_lab._mlir'); "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if "ModuleNotFoundError" in out.stderr and ("anywidget" in out.stderr or "perfetto" in out.stderr):
        pytest.skip(f"{module} needs the notebook extra")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"{module} loads MLIR: {out.stdout}"
