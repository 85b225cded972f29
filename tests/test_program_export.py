"""An export ships the whole program: for every kind of Kernel the library builds, the exported
module's PROGRAM is the in-process program (launches with their cubins, scratch, steps), so an
export can never compute something else. Runs on the CPU (compiling needs no GPU)."""

from __future__ import annotations

import pytest
from program_kinds import KINDS, build

from mgpu_lab.errors import ExportError, LaunchArgumentError
from mgpu_lab.runtime.export import export_source
from mgpu_lab.runtime.program import Copy, Launch, Program, Ref, Scratch


def _exported_namespace(kernel, name: str) -> dict:
    namespace: dict = {"__name__": name}
    exec(compile(export_source(kernel, name), f"{name}.py", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_exported_program_is_the_in_process_program(kind):
    kernel = build(kind)
    module = _exported_namespace(kernel, f"exported_{kind}")
    program = kernel.program.to_dict()
    assert module["PROGRAM"] == program
    runner = module[kernel.name]
    assert [s for s, _ in runner.in_specs] == [tuple(s.shape) for s in kernel.inputs]
    assert len(runner.launchers) == len(kernel.launches)
    # what the module's launchers will run: each launch's own cubin and launch geometry
    for theirs, ours in zip(runner.launchers, kernel.launches):
        assert theirs.spec["cubin"] == ours.cubin and tuple(theirs.spec["grid"]) == ours.grid


def test_the_split_k_export_reduces_instead_of_returning_partial_sums():
    """The bug this replaces: the exported workspace split-K returned the (16, 512, 512) f32
    partials. Now the module's signature is the user's: A and B in, C (512, 512) bf16 out."""
    module = _exported_namespace(build("split_k_workspace"), "split_export")
    program = module["PROGRAM"]
    assert program["outputs"] == [([512, 512], "bfloat16")]
    assert program["scratch"] == [([16, 512, 512], "float32", "empty", "split_k_partials")]
    assert [step.get("launch") for step in program["steps"]] == [0, 1]
    assert "ml_dtypes (for bfloat16)" in module["__doc__"]


def test_the_padded_and_stream_k_exports_carry_their_steps():
    padded = _exported_namespace(build("padded"), "padded_export")["PROGRAM"]
    assert padded["inputs"] == [([129, 72], "bfloat16"), ([72, 257], "bfloat16")]
    assert [list(s) for s in padded["steps"][0].values()] == [[["input", 1], ["scratch", 0]]]
    assert padded["steps"][-1] == {"copy": [["scratch", 1], ["output", 0]]}
    stream_k = _exported_namespace(build("stream_k"), "stream_k_export")["PROGRAM"]
    assert [fill for _, _, fill, _ in stream_k["scratch"]] == ["empty", "zeros"]
    assert len(stream_k["inputs"]) == 2, "the workspace and flags are the module's, not the caller's"


def test_a_program_whose_steps_do_not_fit_is_refused():
    k = build("plain").compiled
    a, b = Ref("input", 0), Ref("input", 1)
    with pytest.raises(LaunchArgumentError, match=r"step 0: kernel gemm_nn_256x512x384 takes 3 arrays, the step binds 2"):
        Program("bad", k.inputs, k.outputs, (Launch(k, (a, b)),))
    with pytest.raises(LaunchArgumentError, match=r"no step writes output\(s\) \[0\]"):
        Program("bad", k.inputs, k.outputs, (Launch(k, (a, b, Ref("scratch", 0))),),
                (Scratch(tuple(k.outputs[0].shape), k.outputs[0].dtype),))
    with pytest.raises(LaunchArgumentError, match=r"step 0: input 1 is \(\(384, 512\), 'bfloat16'\), kernel .* "
                                                  r"expects \(\(256, 384\), 'bfloat16'\)"):
        Program("bad", k.inputs, k.outputs, (Launch(k, (b, b, Ref("output", 0))),))
    with pytest.raises(LaunchArgumentError, match="a step must not write a user input"):
        Program("bad", k.inputs, k.outputs, (Launch(k, (a, b, Ref("output", 0))), Copy(Ref("output", 0), a)))
    with pytest.raises(LaunchArgumentError, match="scratch 3 does not exist"):
        Program("bad", k.inputs, k.outputs, (Launch(k, (a, b, Ref("scratch", 3))),))


def test_an_exported_module_name_that_would_shadow_a_module_is_refused(tmp_path):
    kernel = build("plain")
    for stem, what in [("numpy", "would shadow the installed module 'numpy'"), ("json", "would shadow"),
                       ("print", "builtin or dunder"), ("__all__", "builtin or dunder"), ("class", "identifier")]:
        with pytest.raises(ExportError, match=what):
            kernel.export(tmp_path / f"{stem}.py")
        assert not (tmp_path / f"{stem}.py").exists()
    with pytest.raises(ExportError, match="pick another file name, e.g. numpy_kernel.py"):
        kernel.export(tmp_path / "numpy.py")


def test_a_kernel_named_like_a_dunder_is_refused():
    compiled = build("plain").compiled.renamed("__all__")
    with pytest.raises(ExportError, match="not a Python keyword or a dunder name"):
        export_source(compiled, "mod")


def test_the_removed_wrapper_types_still_construct_with_a_warning():
    """0.1 code that built PaddedGemm / SplitKGemm / StreamKGemm itself keeps working until 0.3:
    the stand-in warns, naming make_gemm, and returns the Kernel that replaced the wrapper."""
    import warnings

    from mgpu_lab.kernels.gemm import make_gemm
    from mgpu_lab.kernels.gemm.kernel import resolve_tiling
    from mgpu_lab.runtime.kernel import Kernel

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from mgpu_lab.examples.gemm import PaddedGemm, SplitKGemm
        from mgpu_lab.examples.gemm_stream_k import StreamKGemm

        padded = PaddedGemm(make_gemm, 129, 257, 72, transpose_b=False, dtype="bfloat16", out_dtype="bfloat16")
        split = SplitKGemm(resolve_tiling(512, 512, 16384, split_k=16, split_k_reduce="workspace"), {})
        t = resolve_tiling(1024, 1024, 1024, tile_m=128, tile_n=256, persistent="stream_k")
        stream = StreamKGemm(build("stream_k"), t)  # 0.1 passed the stream-K kernel and its tiling
    assert all(isinstance(k, Kernel) for k in (padded, split, stream))
    assert len(split.launches) == 2 and any(type(s).__name__ == "Copy" for s in padded.program.steps)
    assert [s.name for s in stream.program.scratch] == ["stream_k_partials", "stream_k_flags"]
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    for name in ("PaddedGemm", "SplitKGemm", "StreamKGemm"):
        assert any(name in m and "make_gemm(...)" in m and "0.3" in m for m in messages), (name, messages)
