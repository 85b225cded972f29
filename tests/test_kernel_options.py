"""`kernel(options=..., **overrides)` merges; occupancy knobs reach the PTX and ptxas honours them."""

from __future__ import annotations

import re

import pytest

import mgpu_lab
from mgpu_lab.errors import CompileOptionError, ResourceLimitError
from mgpu_lab.examples.softmax import make_softmax


def test_overrides_merge_into_options():
    opts = mgpu_lab.CompileOptions(target="sm_90a", keep_passes=True, use_cache=False)
    k = make_softmax(128, 64, options=opts, max_registers=96)
    assert k.compiled.passes, "keep_passes from options= was dropped"
    assert k.compiled.resources.registers <= 96
    assert ".maxnreg 96" in k.compiled.ptx


def test_unknown_override_names_the_option():
    with pytest.raises(CompileOptionError, match=r"max_regs: not a compile option; the options are cache_dir, "):
        make_softmax(128, 64, max_regs=64)


def test_options_must_be_compile_options():
    with pytest.raises(TypeError, match="options: expected a CompileOptions, got dict"):
        make_softmax(128, 64, options={"target": "sm_90a"})


def test_max_registers_is_honoured_by_ptxas():
    free = make_softmax(1024, 256, target="sm_90a", use_cache=False)
    capped = make_softmax(1024, 256, target="sm_90a", use_cache=False, max_registers=64)
    assert free.compiled.resources.registers > 64
    assert capped.compiled.resources.registers <= 64


def test_min_blocks_per_sm_bounds_registers():
    k = make_softmax(1024, 256, target="sm_90a", use_cache=False, min_blocks_per_sm=4)
    assert re.search(r"\.minnctapersm 4", k.compiled.ptx)
    assert k.compiled.resources.registers <= 65536 // (4 * 128)


@pytest.mark.parametrize("kw, error, message", [
    (dict(max_registers=300), ValueError, r"max_registers: expected an int in \[24, 255\]"),
    (dict(min_blocks_per_sm=0), ValueError, "min_blocks_per_sm: expected an int >= 1, got 0"),
    (dict(max_registers=255, min_blocks_per_sm=4), ResourceLimitError, "more than the SM's 65536"),
])
def test_bad_occupancy_names_the_option(kw, error, message):
    with pytest.raises(error, match=message):
        make_softmax(128, 64, target="sm_90a", **kw)


def test_mbarrier_timeout_is_a_compile_option():
    from mgpu_lab.examples.scaled_add import make_scaled_add

    plain = make_scaled_add(256, 256, target="sm_90a", use_cache=False)
    timed = make_scaled_add(256, 256, target="sm_90a", use_cache=False, mbarrier_timeout_s=0.5)
    assert "globaltimer" not in plain.compiled.ptx and "trap" not in plain.compiled.ptx
    assert "%globaltimer" in timed.compiled.ptx and "500000000" in timed.compiled.ptx
