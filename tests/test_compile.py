"""CPU tests: kernels build, compile to SASS, and the artifacts say what they should."""

from __future__ import annotations

import json
import re

import pytest

import mgpu_lab
from mgpu_lab.compiler.compiled_kernel import CompiledKernel
from mgpu_lab.examples.block_sum import make_block_sum
from mgpu_lab.examples.tiled_copy import make_tiled_copy
from mgpu_lab.examples.vector_add import make_vector_add


def opcodes(sass: str) -> list[str]:
    return re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass)


def test_vector_add_sass_uses_16_byte_accesses_and_no_local_memory():
    k = make_vector_add(1 << 16)
    ops = opcodes(k.compiled.sass)
    assert "LDG.E.128" in ops and "STG.E.128" in ops
    assert not any(op.startswith(("LDL", "STL")) for op in ops)
    r = k.compiled.resources
    assert 0 < r.registers <= 64
    assert r.spill_stores_bytes == r.spill_loads_bytes == r.stack_frame_bytes == 0
    assert k.compiled.target == "sm_90a"
    assert ".target sm_90a" in k.compiled.ptx


def test_block_sum_uses_warp_shuffles_and_a_block_barrier():
    k = make_block_sum(1 << 20, blocks=128)
    ops = opcodes(k.compiled.sass)
    assert sum(op.startswith("SHFL.BFLY") for op in ops) >= 5
    assert any(op.startswith("BAR.SYNC") for op in ops)
    assert k.compiled.dynamic_smem_bytes == 8 * 4  # one float per warp
    assert k.compiled.resources.barriers == 1


def test_tiled_copy_stages_through_shared_memory():
    k = make_tiled_copy(512, 256)
    ops = opcodes(k.compiled.sass)
    assert ops.count("STS.128") == 4 and ops.count("LDS.128") == 4
    assert k.compiled.resources.static_smem_bytes == 0  # all smem is dynamic, from offset 0
    assert ".extern .shared .align 1024" in k.compiled.ptx
    [buf] = k.compiled.smem_layout
    assert (buf.offset, buf.nbytes, buf.shape) == (0, 64 * 64 * 4, (64, 64))


def test_line_map_points_at_the_kernel_body_lines():
    k = make_vector_add(1 << 12)
    import mgpu_lab.examples.vector_add as src

    lines = open(src.__file__).read().splitlines()
    spans = [s for s in k.compiled.line_map if s.file == src.__file__]
    assert spans, "no line info for the example file"
    files = {s.file for s in k.compiled.line_map}
    assert files == {src.__file__}, f"internal frames leaked into the line map: {files}"
    by_text = {lines[s.line].strip(): s for s in spans}
    store = next(s for t, s in by_text.items() if t.startswith("vector.store"))
    sass_lines = k.compiled.sass.splitlines()
    assert any("STG.E.128" in sass_lines[i] for i in store.sass_lines)
    ptx_lines = k.compiled.ptx.splitlines()
    assert any("st.global" in ptx_lines[i] for i in store.ptx_lines)
    assert src.__file__ in k.compiled.sources


def test_passes_are_recorded_on_request_and_end_in_ptx():
    k = make_vector_add(1 << 12, keep_passes=True, use_cache=False)
    names = [name for name, _ in k.compiled.passes]
    assert names[0] == "input" and names[-1].startswith("gpu-module-to-binary")
    assert any("convert-gpu-to-nvvm" in n for n in names)
    assert "gpu.func @vector_add" in k.compiled.passes[0][1]
    assert "llvm.func @vector_add" in dict(k.compiled.passes)["gpu.module(reconcile-unrealized-casts)"]
    assert make_vector_add(1 << 12, use_cache=False).compiled.passes == ()


def test_dump_dir_writes_every_artifact_and_loads_back(tmp_path):
    k = make_vector_add(1 << 12, dump_dir=str(tmp_path), keep_passes=True, use_cache=False)
    for ext in ("mlir", "ptx", "cubin", "sass"):
        assert (tmp_path / f"vector_add.{ext}").stat().st_size > 0
    assert len(list((tmp_path / "passes").iterdir())) == len(k.compiled.passes)
    back = CompiledKernel.load(tmp_path)
    assert back.cubin == k.compiled.cubin and back.sass == k.compiled.sass
    assert back.resources == k.compiled.resources and back.line_map == k.compiled.line_map
    assert json.loads((tmp_path / "kernel.json").read_text())["spec"]["grid"] == [4, 1, 1]


def test_dump_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MGPU_LAB_DUMP_DIR", str(tmp_path))
    make_vector_add(1 << 10, use_cache=False)
    assert (tmp_path / "vector_add.ptx").exists()


def test_target_is_overridable():
    k = make_vector_add(1 << 12, target="sm_90", use_cache=False)
    assert re.search(r"^\.target sm_90$", k.compiled.ptx, re.M)
    assert k.compiled.target == "sm_90"


def test_import_needs_no_gpu_and_no_mlir():
    import subprocess
    import sys

    code = "import sys, mgpu_lab; assert 'mlir' not in sys.modules, 'import mgpu_lab loaded MLIR'; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_public_api_surface():
    import importlib

    for submodule in ("mgpu_lab.autotune", "mgpu_lab.exporter"):  # must not shadow the functions
        importlib.import_module(submodule)

    assert callable(mgpu_lab.kernel) and callable(mgpu_lab.tune) and callable(mgpu_lab.export)
    assert mgpu_lab.ShapeDtype((4, 8), "bfloat16").nbytes == 64
    with pytest.raises(AttributeError):
        mgpu_lab.does_not_exist  # noqa: B018
