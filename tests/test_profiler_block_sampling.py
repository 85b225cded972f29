"""profile_blocks: only every n-th block records its regions; the others run the plain code.

CPU: the option is checked, recorded in the ProfilerSpec, and the body is traced twice behind
a branch on the block id with the records in one copy only (compile for sm_90a, read the SASS).
GPU: the trace holds regions from the sampled blocks only, every block's start and end, and the
kernel's results are unchanged.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from test_profiler_global_buffer import RECORDS, SD, N, _regions

import mgpu_lab
from mgpu_lab.errors import ProfilerNote
from mgpu_lab.kernels.attention import PROFILE_BLOCKS, attention_definition, make_attention


def build(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerNote)
        return mgpu_lab.kernel(_regions, grid=N // 256, block=256, in_shapes=SD, out_shapes=SD, profile=True,
                               target="sm_90a", use_cache=False, **kw)


def records(sass: str) -> int:
    """The region records of a kernel: predicated 8-byte stores (global or shared)."""
    return len(re.findall(r"@!?P\d+\s+(?:STG\.E\.64|STS\.64)\b", sass))


@pytest.mark.parametrize("buffer", ["smem", "global"])
def test_sampled_kernel_records_in_one_copy_of_the_body(buffer):
    every, sampled = build(profile_buffer=buffer).compiled, build(profile_buffer=buffer, profile_blocks=4).compiled
    assert every.profiler.block_stride == 1 and sampled.profiler.block_stride == 4
    assert every.profiler.region_names == sampled.profiler.region_names == ("load", "store", "add")
    assert records(every.sass) == records(sampled.sass) == RECORDS
    # the body is there twice: the sampled copy and the plain one
    loads = len(re.findall(r"\bLDG\.E\b", every.sass))
    assert loads >= 1 and len(re.findall(r"\bLDG\.E\b", sampled.sass)) == 2 * loads
    assert sampled.to_json()["spec"]["profiler"]["block_stride"] == 4  # saved with the kernel


def test_profile_blocks_one_is_every_block():
    k = build(profile_blocks=1).compiled
    assert k.profiler.block_stride == 1 and records(k.sass) == RECORDS


@pytest.mark.parametrize("bad", [0, -2, 2.0, "4", True])
def test_bad_profile_blocks_names_the_argument(bad):
    with pytest.raises(ValueError, match=r"profile_blocks: expected a positive int .*got " + re.escape(repr(bad))):
        build(profile_blocks=bad)


def test_attention_samples_blocks_unless_persistent():
    one_shot = attention_definition(2, 16, 8192, 8192, 128)
    persistent = attention_definition(2, 16, 8192, 8192, 128, persistent=True)
    assert one_shot["profile_blocks"] == PROFILE_BLOCKS and persistent["profile_blocks"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerNote)
        k = make_attention(1, 2, 1024, 1024, 64, profile=True, target="sm_90a", use_cache=False)
        mine = make_attention(1, 2, 1024, 1024, 64, profile=True, profile_blocks=2, target="sm_90a", use_cache=False)
    assert k.compiled.profiler.block_stride == PROFILE_BLOCKS and mine.compiled.profiler.block_stride == 2
    with pytest.raises(ValueError, match=r"profile_tiles must be an int >= 1 .* or 'auto', got 'all'"):
        attention_definition(2, 16, 8192, 8192, 128, profile_tiles="all")


@pytest.mark.parametrize("kwargs", [{"persistent": True}, {"persistent": True, "profile_buffer": "smem"}, {}])
def test_profiled_attention_does_not_spill(kwargs):
    # the persistent consumer runs at its register limit: the profiler's finish once kept the
    # block's row address live from the kernel's start and spilled 4 bytes there
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerNote)
        k = make_attention(2, 16, 8192, 8192, 128, profile=True, target="sm_90a", use_cache=False, **kwargs).compiled
    assert k.resources.spill_stores_bytes == 0 and k.resources.spill_loads_bytes == 0


@pytest.mark.gpu
@pytest.mark.parametrize("buffer", ["smem", "global"])
def test_only_sampled_blocks_record(rng, buffer):
    import cupy

    k = build(profile_buffer=buffer, profile_blocks=4)
    a = cupy.asarray(rng.standard_normal(N).astype(np.float32))
    out = cupy.full((N,), np.nan, np.float32)
    k(a, out=out)
    np.testing.assert_allclose(out.get(), 2 * a.get(), rtol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow, no anomaly
        trace = k.last_trace
    blocks = N // 256
    assert sorted(trace.block_ids.tolist()) == list(range(blocks))  # every block stamped its span
    assert (trace.block_end_ns > trace.block_start_ns).all()
    assert set(trace.block.tolist()) == set(range(0, blocks, 4))  # regions only from the sampled ones
    assert trace.num_events == blocks // 4 * 2 * 3
