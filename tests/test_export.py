"""Export to a plain module: only numpy/CuPy/cuda-bindings imports; the GPU run matches bit for bit."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from mgpu_lab.examples.block_sum import make_block_sum
from mgpu_lab.examples.vector_add import make_vector_add

ALLOWED_IMPORTS = {"__future__", "base64", "zlib", "ctypes", "functools", "threading", "typing", "collections",
                   "os", "numpy", "cupy", "cuda", "cuda.bindings", "ml_dtypes", "re", "copy", "math",
                   "torch"}  # torch only inside as_torch_op (test_torch_op.py checks the import is lazy)

# Runs a script where `mlir` and `mgpu_lab` cannot be imported, as on a machine without them.
BLOCKER = "import sys\nsys.modules['mlir'] = None\nsys.modules['mgpu_lab'] = None\n"


def _imports(text: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module)
    return names


def test_exported_module_imports_only_numpy_cupy_and_cuda_bindings(tmp_path):
    k = make_vector_add(1 << 12)
    path = k.export(tmp_path / "vadd_export.py")
    names = _imports(path.read_text())
    assert names <= ALLOWED_IMPORTS, names - ALLOWED_IMPORTS
    script = BLOCKER + textwrap.dedent(f"""
        sys.path.insert(0, {str(tmp_path)!r})
        import vadd_export
        assert vadd_export.PROGRAM["launches"][0]["cubin"] == open({str(tmp_path / 'cubin.bin')!r}, 'rb').read()
        assert vadd_export.PROGRAM["name"] == "vector_add"
        assert vadd_export.external_stream(5).ptr == 5  # program_runner's copies run on it
        print("imported", vadd_export.vector_add.n_in)
    """)
    (tmp_path / "cubin.bin").write_bytes(k.compiled.cubin)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "imported 2" in out.stdout


def test_export_refuses_bad_paths_and_leaves_nothing(tmp_path):
    k = make_vector_add(1 << 12)
    with pytest.raises(ValueError, match=r"path: expected a \.py file name, got"):
        k.export(tmp_path / "vadd.txt")
    with pytest.raises(ValueError, match="is not a Python identifier"):
        k.export(tmp_path / "my-kernel.py")
    with pytest.raises(TypeError, match="kernel: expected an mgpu_lab Kernel or CompiledKernel, got int"):
        from mgpu_lab.runtime.export import export

        export(3, tmp_path / "x.py")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.gpu
@pytest.mark.parametrize("make, inputs", [
    (lambda: make_vector_add(1 << 20), lambda rng: [rng.standard_normal(1 << 20).astype(np.float32)] * 2),
    (lambda: make_block_sum(1 << 22, 1024), lambda rng: [rng.standard_normal(1 << 22).astype(np.float32)]),
])
def test_exported_kernel_matches_the_original_bit_for_bit(tmp_path, rng, make, inputs):
    import cupy

    k = make()
    k.export(tmp_path / "exported_kernel.py")
    xs = inputs(rng)
    for i, x in enumerate(xs):
        np.save(tmp_path / f"in{i}.npy", x)
    ours = k(*[cupy.asarray(x) for x in xs]).get()
    script = BLOCKER + textwrap.dedent(f"""
        import numpy as np, cupy
        sys.path.insert(0, {str(tmp_path)!r})
        import exported_kernel as m
        xs = [cupy.asarray(np.load({str(tmp_path)!r} + f"/in{{i}}.npy")) for i in range({len(xs)})]
        out = cupy.full(m.SPEC["outputs"][0][0], np.nan, np.float32)
        m.{k.name}(*xs, out=out)
        np.save({str(tmp_path / 'out.npy')!r}, out.get())
        try:
            m.{k.name}(xs[0][:10], *xs[1:])
        except m.LaunchArgumentError as e:
            print("checked:", e)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "checked: input 0 of" in run.stdout and "expected shape" in run.stdout
    theirs = np.load(tmp_path / "out.npy")
    assert theirs.tobytes() == ours.tobytes()


@pytest.mark.gpu
def test_tuned_gemm_exports_and_runs_without_mgpu_lab(tmp_path, rng, monkeypatch):
    """The issue's loop end to end: tune the TMA + WGMMA GEMM, export the best, run the module
    where mlir and mgpu_lab cannot be imported, and match the tuned kernel bit for bit."""
    import functools

    import cupy
    import ml_dtypes

    import mgpu_lab
    from mgpu_lab.kernels.gemm import make_gemm

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    m = n = k = 2048
    a, b = (rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16) for _ in range(2))
    da, db = cupy.asarray(a), cupy.asarray(b)
    ref = a.astype(np.float32) @ b.astype(np.float32).T
    result = mgpu_lab.tune(functools.partial(make_gemm, m, n, k, transpose_b=True),
                           {"tile_n": [128, 256], "stages": [3, 4]}, args=(da, db), reference=lambda x, y: ref)
    assert result.best is not None and all(c.status == "timed" for c in result.candidates)
    best = result.best_kernel
    ours = best(da, db).get()
    best.export(tmp_path / "tuned_gemm.py")
    np.save(tmp_path / "a.npy", a.view(np.uint16))
    np.save(tmp_path / "b.npy", b.view(np.uint16))
    script = BLOCKER + textwrap.dedent(f"""
        import numpy as np, cupy, ml_dtypes
        sys.path.insert(0, {str(tmp_path)!r})
        import tuned_gemm as m
        a = cupy.asarray(np.load({str(tmp_path / 'a.npy')!r}).view(ml_dtypes.bfloat16))
        b = cupy.asarray(np.load({str(tmp_path / 'b.npy')!r}).view(ml_dtypes.bfloat16))
        out = m.{best.name}(a, b)
        np.save({str(tmp_path / 'c.npy')!r}, out.get().view(np.uint16))
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    theirs = np.load(tmp_path / "c.npy")
    assert theirs.tobytes() == ours.view(np.uint16).tobytes()
