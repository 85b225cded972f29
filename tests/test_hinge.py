"""Everything after compilation reads CompiledKernel/Trace data: none of it may load MLIR."""

from __future__ import annotations

import subprocess
import sys

import pytest

AFTER_COMPILATION = [
    "mgpu_lab.runtime.portable", "mgpu_lab.runtime.launcher", "mgpu_lab.runtime.arrays", "mgpu_lab.exporter",
    "mgpu_lab.runtime.isolation", "mgpu_lab.runtime.isolated_worker", "mgpu_lab.runtime.fault_report",
    "mgpu_lab.profiler.decode", "mgpu_lab.profiler.trace", "mgpu_lab.profiler.perfetto_export",
    "mgpu_lab.profiler.chrome_export", "mgpu_lab.widgets.sass_view", "mgpu_lab.widgets.smem_view",
    "mgpu_lab.widgets.ir_view", "mgpu_lab.widgets.timeline", "mgpu_lab.widgets.static_html",
]


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
