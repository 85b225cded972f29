"""CompiledKernel holds its KernelSpec, waits for disassembly explicitly, keeps per-pass times."""

from __future__ import annotations

import dataclasses

from mgpu_lab.compiler.compiled_kernel import CompiledKernel, Disassembly
from mgpu_lab.compiler.kernel_spec import KernelSpec
from mgpu_lab.examples.vector_add import make_vector_add


def test_spec_fields_are_read_through_the_spec():
    ck = make_vector_add(1 << 12, target="sm_90a", use_cache=False).compiled
    assert isinstance(ck.spec, KernelSpec)
    spec_fields = {f.name for f in dataclasses.fields(KernelSpec)}
    assert not spec_fields & {f.name for f in dataclasses.fields(CompiledKernel)}, "re-declared spec fields"
    assert (ck.name, ck.grid, ck.block, ck.inputs) == (ck.spec.name, ck.spec.grid, ck.spec.block, ck.spec.inputs)
    assert ck.num_blocks == ck.spec.num_blocks == ck.grid[0]


def test_disassembly_is_awaited_explicitly_and_survives_a_round_trip(tmp_path):
    ck = make_vector_add(1 << 12, target="sm_90a", use_cache=False).compiled
    result = ck.wait_disassembly()
    assert isinstance(result, Disassembly) and ck.disassembly is result
    assert "LDG.E.128" in result.sass and result.line_map and ck.sass is result.sass
    back = CompiledKernel.load(ck.save(tmp_path))
    assert back.spec == ck.spec and back.sass == ck.sass and back.line_map == ck.line_map
    assert back.pass_seconds == ck.pass_seconds


def test_every_pass_is_timed_in_order():
    ck = make_vector_add(1 << 12, target="sm_90a", use_cache=False, keep_passes=True).compiled
    names = [name for name, _ in ck.pass_seconds]
    assert names == [name for name, _ in ck.passes[1:]]  # passes[0] is the input module
    assert all(seconds >= 0 for _, seconds in ck.pass_seconds) and len(names) >= 3


def test_the_older_flat_json_layout_still_loads():
    ck = make_vector_add(1 << 12, target="sm_90a", use_cache=False).compiled
    data = ck.to_json()
    flat = {**data.pop("spec"), **data.pop("disassembly"), **data}
    back = CompiledKernel.from_json(flat, ck.cubin)
    assert back.spec == ck.spec and back.sass == ck.sass
