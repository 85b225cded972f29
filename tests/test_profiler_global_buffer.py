"""The profiler's global-memory buffer (CPU: compile for sm_90a, read PTX/SASS, decode synthetic rows).

profile_buffer="global" keeps only the block header and per-unit counters in shared memory and
stores each event straight to the block's row of the global buffer, in the same predicated
straight-line block as the smem record; "auto" picks it exactly when the smem row would not fit.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from test_profiler_decode import T0, Block, begin, decode_quietly, end, make_spec, write_buffer

import mgpu_lab
from mgpu_lab import dsl
from mgpu_lab.builder.profiling import choose_buffer, smem_area_bytes
from mgpu_lab.dsl import arith, c, memref
from mgpu_lab.errors import ProfilerNote
from mgpu_lab.profiler import format as fmt
from mgpu_lab.profiler.decode import ProfilerOverflowWarning, decode_buffer

N = 1 << 16
SD = mgpu_lab.ShapeDtype((N,), "float32")
LIMIT = 227 * 1024  # sm_90a's shared memory per block
RECORDS = 6  # begin and end of each of the three regions below


def _regions(ctx, a, out, smem):
    i = arith.addi(arith.muli(dsl.block_idx(), c(256)), dsl.thread_idx())
    with ctx.named_region("load"):
        x = memref.load(a, [i])
    with ctx.named_region("store"):
        with ctx.named_region("add"):
            y = arith.addf(x, x)
        memref.store(y, out, [i])


def build(buffer: str, smem=None, **kw):
    """The small profiled kernel (2 warpgroups per block) with `profile_buffer=buffer`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerNote)
        return mgpu_lab.kernel(_regions, grid=N // 256, block=256, in_shapes=SD, out_shapes=SD, smem=smem,
                               profile=True, profile_buffer=buffer, target="sm_90a", use_cache=False, **kw).compiled


def opcodes(sass: str) -> list[str]:
    """Every instruction's opcode with its modifiers, predicate left out."""
    return re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][\w.]*)", sass)


def count(ops: list[str], pattern: str) -> int:
    return sum(bool(re.fullmatch(pattern, op)) for op in ops)


@pytest.fixture(scope="module")
def both():
    return build("smem"), build("global")


def test_global_events_are_64_bit_global_stores_not_shared(both):
    smem, glob = both
    assert glob.profiler.buffer == "global" and smem.profiler.buffer == "smem"
    # the records' own stores (inline PTX: the tag immediate and the clock register)
    def records(space, ptx):
        return re.findall(rf"st\.{space}\.v2\.b32\s+\[[^\]]+\],\s*\{{0x[0-9a-f]+, clock\}}", ptx)
    assert len(records("global", glob.ptx)) == RECORDS and not records("shared", glob.ptx)
    assert len(records("shared", smem.ptx)) == RECORDS and not records("global", smem.ptx)
    # in SASS each record is one predicated 8-byte store (the header's stores are not predicated)
    def predicated(op, sass):
        return len(re.findall(rf"@!?P\d+\s+{op}\b", sass))
    assert predicated(r"STG\.E\.64", glob.sass) == RECORDS and predicated(r"STS\.64", glob.sass) == 0
    assert predicated(r"STS\.64", smem.sass) == RECORDS and predicated(r"STG\.E\.64", smem.sass) == 0


def test_global_records_add_no_branches(both):
    """Predicated records, no branch on the thread index: the global-mode kernel has no more
    control flow than the smem one (less: its end copies 20 words, not a 1044-word row), and
    exactly that of a kernel without records."""
    smem, glob = both
    s_ops, g_ops = opcodes(smem.sass), opcodes(glob.sass)
    for op in ("BSSY", "BRA", "BSYNC"):
        assert count(g_ops, op) <= count(s_ops, op), op
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerNote)
        bare = mgpu_lab.kernel(lambda ctx, a, o, s: None, grid=N // 256, block=256, in_shapes=SD, out_shapes=SD,
                               profile=True, profile_buffer="global", target="sm_90a", use_cache=False).compiled
    b_ops = opcodes(bare.sass)
    for op in ("BSSY", "BRA"):
        assert count(g_ops, op) == count(b_ops, op), op


def test_global_smem_footprint_is_the_header_area(both):
    smem, glob = both
    units = 2
    header = (fmt.BLOCK_HEADER_WORDS + units * fmt.UNIT_HEADER_WORDS) * 4
    [rec] = [b for b in glob.smem_layout if b.kind == "profiler"]
    assert rec.nbytes == header == glob.dynamic_smem_bytes
    assert smem.dynamic_smem_bytes == fmt.words_per_block(units, smem.profiler.capacity) * 4
    # the global row keeps the same layout, so the host decodes it the same way
    assert glob.profiler.words_per_block == smem.profiler.words_per_block
    # a big capacity costs no shared memory in global mode
    assert build("global", profile_capacity=1 << 16).dynamic_smem_bytes == header


def test_choose_buffer_picks_global_exactly_when_smem_would_not_fit():
    units, kernel = 3, 200 * 1024
    # the largest capacity whose row fits beside `kernel` bytes within LIMIT
    fits = (LIMIT - kernel - fmt.BLOCK_HEADER_WORDS * 4 - units * fmt.UNIT_HEADER_WORDS * 4) // (units * 8)
    assert kernel + smem_area_bytes(units, fits, "smem", kernel) <= LIMIT
    assert kernel + smem_area_bytes(units, fits + 1, "smem", kernel) > LIMIT
    assert choose_buffer("auto", units=units, capacity=fits, kernel_smem=kernel, limit=LIMIT) == "smem"
    assert choose_buffer("auto", units=units, capacity=fits + 1, kernel_smem=kernel, limit=LIMIT) == "global"
    # an explicit mode is kept whatever the sizes
    assert choose_buffer("smem", units=units, capacity=fits + 1, kernel_smem=kernel, limit=LIMIT) == "smem"
    assert choose_buffer("global", units=units, capacity=1, kernel_smem=0, limit=LIMIT) == "global"


def test_auto_at_the_boundary_of_a_compiled_kernel():
    """A kernel whose smem row ends exactly at the limit stays in smem (no note); one event per
    unit more and it goes global, with a ProfilerNote naming the sizes."""
    kernel = 200 * 1024
    units = 2
    fits = (LIMIT - kernel - (fmt.BLOCK_HEADER_WORDS + units * fmt.UNIT_HEADER_WORDS) * 4) // (units * 8)
    smem = mgpu_lab.ShapeDtype((kernel,), "uint8")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProfilerNote)
        at = mgpu_lab.kernel(_regions, grid=N // 256, block=256, in_shapes=SD, out_shapes=SD, smem=smem,
                             profile=True, profile_capacity=fits, target="sm_90a", use_cache=False).compiled
    assert at.profiler.buffer == "smem" and at.dynamic_smem_bytes == LIMIT
    with pytest.warns(ProfilerNote, match=rf"does not fit beside the kernel's {kernel} B of shared memory "
                                          rf"within {LIMIT} B, so the events go to global memory"):
        past = mgpu_lab.kernel(_regions, grid=N // 256, block=256, in_shapes=SD, out_shapes=SD, smem=smem,
                               profile=True, profile_capacity=fits + 1, target="sm_90a", use_cache=False).compiled
    assert past.profiler.buffer == "global" and past.dynamic_smem_bytes < LIMIT


def test_auto_keeps_small_kernels_in_smem():
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProfilerNote)
        k = mgpu_lab.kernel(_regions, grid=N // 256, block=256, in_shapes=SD, out_shapes=SD, profile=True,
                            target="sm_90a").compiled
    assert k.profiler.buffer == "smem"


@pytest.mark.parametrize("bad", ["shared", "", None, 1, "SMEM"])
def test_bad_profile_buffer_is_named(bad):
    expected = rf"profile_buffer: expected one of 'smem', 'global', 'auto', got {re.escape(repr(bad))}"
    with pytest.raises(ValueError, match=expected):
        mgpu_lab.kernel(_regions, grid=N // 256, block=256, in_shapes=SD, out_shapes=SD, profile=True,
                        profile_buffer=bad, target="sm_90a")
    with pytest.raises(ValueError, match=expected):  # also without profiling: a typo is never silent
        mgpu_lab.kernel(_regions, grid=N // 256, block=256, in_shapes=SD, out_shapes=SD, profile_buffer=bad,
                        target="sm_90a")


def test_bad_profile_buffer_in_the_kernels_and_magics():
    from mgpu_lab.kernels.attention import attention_definition
    from mgpu_lab.kernels.gemm import gemm_definition
    from mgpu_lab.magics import MagicArgumentError, parse_magic_line

    with pytest.raises(ValueError, match=r"profile_buffer: expected one of .*, got 'l2'"):
        gemm_definition(256, 256, 256, profile_buffer="l2")
    with pytest.raises(ValueError, match=r"profile_buffer: expected one of .*, got 'l2'"):
        attention_definition(1, 2, 512, 512, 64, profile_buffer="l2")
    assert parse_magic_line("k --grid 1 --block 128 --profile --profile-buffer global").profile_buffer == "global"
    assert parse_magic_line("k --grid 1 --block 128 --profile").profile_buffer == "auto"
    with pytest.raises(MagicArgumentError, match=r"--profile-buffer: invalid choice: 'l2'"):
        parse_magic_line("k --grid 1 --block 128 --profile --profile-buffer l2")


def test_attention_records_every_event_in_global_memory():
    """profile_buffer="global" and "auto" hold every event (auto in global memory when they do
    not fit beside the ring); "smem" cuts the capacity to what fits beside the kernel."""
    from mgpu_lab.kernels.attention import attention_definition, make_attention

    shape = (1, 2, 512, 16384, 128)
    everything = attention_definition(*shape, profile_buffer="global")["profile_capacity"]
    cut = attention_definition(*shape, profile_buffer="smem")["profile_capacity"]
    assert attention_definition(*shape)["profile_capacity"] == everything
    assert cut < everything  # a long K/V sequence's events do not all fit beside the ring
    with pytest.warns(ProfilerNote, match="events go to global memory"):
        kernel = make_attention(*shape, profile=True, target="sm_90a")
    assert kernel.compiled.profiler.buffer == "global" and kernel.compiled.profiler.capacity == everything


def test_gemm_8192_profiled_builds_and_keeps_its_ring_in_global_mode():
    """The sample trace's kernel builds by default (its row fits in smem beside no ring, so
    "auto" goes to global memory), and with profile_buffer="global" keeps the plain kernel's
    stages (no slots given up)."""
    from mgpu_lab.kernels.gemm import make_gemm

    shape = dict(m=8192, n=8192, k=8192, transpose_b=True, target="sm_90a")
    plain = make_gemm(**shape)
    with pytest.warns(ProfilerNote, match="events go to global memory"):
        by_default = make_gemm(**shape, profile=True)
    assert by_default.compiled.profiler.buffer == "global"
    assert by_default.program.notes["tiling"] == plain.program.notes["tiling"], "auto keeps the ring"
    profiled = make_gemm(**shape, profile=True, profile_buffer="global")
    t_plain, t_prof = plain.program.notes["tiling"], profiled.program.notes["tiling"]
    assert t_prof == t_plain and t_prof.stages == t_plain.stages
    spec = profiled.compiled.profiler
    assert spec.buffer == "global"
    assert profiled.compiled.dynamic_smem_bytes - plain.compiled.dynamic_smem_bytes <= 1024
    from mgpu_lab.kernels.gemm.kernel import profile_events

    assert spec.capacity == profile_events(t_prof)  # room for every region: no drops
    # asking for smem explicitly gives up ring slots for the row, as before, and still cannot fit it
    with pytest.raises(mgpu_lab.errors.ResourceLimitError, match=r"B of profiler buffer"):
        make_gemm(**shape, profile=True, profile_buffer="smem")


def _global_rows(spec, blocks, junk=0xDEADBEEF):
    """What the device leaves in a global-mode buffer: the smem writer's rows, with the event
    slots no event reached left as the launcher's uninitialized memory (here: junk)."""
    rows = write_buffer(spec, blocks)
    for row in rows:
        for u in range(spec.units_per_block):
            base = fmt.BLOCK_HEADER_WORDS + u * fmt.unit_words(spec.capacity)
            kept = min(int(row[base]), spec.capacity)
            row[base + fmt.UNIT_HEADER_WORDS + kept * fmt.EVENT_WORDS: base + fmt.unit_words(spec.capacity)] = junk
    return rows


def _global_spec(**kw):
    import dataclasses

    return dataclasses.replace(make_spec(**kw), buffer="global")


def test_decode_of_a_global_buffer_with_overflow():
    spec = _global_spec(units=2, capacity=4)
    blk = Block(sm=3, block_id=0, timer_start=T0, timer_end=T0 + 1000, clock_start=0, clock_end=1000)
    # unit 0: 6 attempted events, 4 kept; unit 1: 2 events and junk after them
    blk.units = [[(begin(0), 10), (end(0), 20), (begin(1), 30), (end(1), 40)], [(begin(2), 50), (end(2), 90)]]
    blk.attempted = [6, 2]
    other = Block(sm=4, block_id=1, timer_start=T0, timer_end=T0 + 1000, clock_start=0, clock_end=1000,
                  units=[[(begin(1), 100), (end(1), 300)], []])
    with pytest.warns(ProfilerOverflowWarning, match=r"2 events were dropped in 1 of 4 warpgroups"):
        trace = decode_buffer(_global_rows(spec, [blk, other]), spec)
    assert trace.buffer == "global"
    assert trace.dropped == 2 and trace.dropped_per_unit.tolist() == [[2, 0], [0, 0]]
    names = [(e.block, e.unit, e.name) for e in trace.events()]
    assert sorted(names) == sorted([(0, 0, "load"), (0, 0, "mma"), (0, 1, "store"), (1, 0, "mma")])
    assert (trace.end_ns >= trace.start_ns).all()
    assert "global buffer" in repr(trace) and "dropped=2" in repr(trace)
    title = trace.summary().title()
    assert "events recorded to global memory" in title and "2 events dropped" in title


def test_decode_matches_between_the_modes():
    """The same events read from an smem-mode row and a global-mode one decode alike."""
    blk = Block(sm=1, block_id=0, timer_start=T0, timer_end=T0 + 2000, clock_start=7, clock_end=2007,
                units=[[(begin(0), 10), (begin(2), 20), (end(2), 30), (end(0), 40)], [(begin(1), 5), (end(1), 6)]])
    smem_spec, glob_spec = make_spec(units=2, capacity=8), _global_spec(units=2, capacity=8)
    a = decode_quietly(write_buffer(smem_spec, [blk]), smem_spec)
    b = decode_quietly(_global_rows(glob_spec, [blk]), glob_spec)
    for column in ("block", "unit", "region", "start_ns", "end_ns", "depth", "flags"):
        np.testing.assert_array_equal(getattr(a, column), getattr(b, column))
    assert (a.buffer, b.buffer) == ("smem", "global")
    assert "smem buffer" in repr(a) and "global memory" not in a.summary().title()


def test_saved_traces_keep_the_buffer(tmp_path):
    import io
    import json
    import zipfile

    from mgpu_lab.profiler.trace import Trace

    spec = _global_spec(units=1, capacity=4)
    blk = Block(sm=0, block_id=0, timer_start=T0, timer_end=T0 + 100, clock_start=0, clock_end=100,
                units=[[(begin(0), 1), (end(0), 2)]])
    trace = decode_quietly(_global_rows(spec, [blk]), spec)
    path = trace.save(tmp_path / "t.npz")
    assert Trace.load(path).buffer == "global"
    # a trace saved before the buffer existed loads as smem (all were)
    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    meta = json.loads(str(np.load(io.BytesIO(members["meta.npy"]))))
    del meta["buffer"]
    out = io.BytesIO()
    np.save(out, np.asarray(json.dumps(meta)))
    members["meta.npy"] = out.getvalue()
    old = tmp_path / "old.npz"
    with zipfile.ZipFile(old, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    assert Trace.load(old).buffer == "smem"
    meta["buffer"] = "l2"
    out = io.BytesIO()
    np.save(out, np.asarray(json.dumps(meta)))
    members["meta.npy"] = out.getvalue()
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    with pytest.raises(ValueError, match=r"meta.buffer: expected one of 'smem', 'global', got 'l2'"):
        Trace.load(tmp_path / "bad.npz")


def _half_unprofiled(ctx, a, out, smem):
    """_regions' loads and stores, with the "add" region traced under ctx.unprofiled()."""
    assert ctx.profiling
    i = arith.addi(arith.muli(dsl.block_idx(), c(256)), dsl.thread_idx())
    with ctx.named_region("load"):
        x = memref.load(a, [i])
    with ctx.unprofiled():
        with ctx.named_region("add"):
            y = arith.addf(x, x)
    with ctx.named_region("store"):
        memref.store(y, out, [i])


def test_unprofiled_code_has_no_region_records():
    # Two regions recorded (4 records), the one under unprofiled() is not even a region name.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerNote)
        k = mgpu_lab.kernel(_half_unprofiled, grid=N // 256, block=256, in_shapes=SD, out_shapes=SD, profile=True,
                            profile_buffer="global", target="sm_90a", use_cache=False).compiled
    assert k.profiler.region_names == ("load", "store")
    assert len(re.findall(r"@!?P\d+\s+STG\.E\.64\b", k.sass)) == 4  # the records: predicated
    # without profile=True, ctx.profiling is False and unprofiled() changes nothing
    seen = []

    def body(ctx, a, out, smem):
        seen.append(ctx.profiling)
        with ctx.unprofiled():
            _regions(ctx, a, out, smem)

    mgpu_lab.kernel(body, grid=N // 256, block=256, in_shapes=SD, out_shapes=SD, target="sm_90a", use_cache=False)
    assert seen == [False]


def test_profiled_attention_records_a_window_of_its_tiles():
    # The consumer's per-tile regions sit in one copy of the unmasked loop; the copies before and
    # after it (as many tiles as the window leaves) have no clock reads, so a window and every
    # tile give the same records in the SASS, and the window's buffer is smaller.
    from mgpu_lab.kernels.attention import make_attention

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProfilerNote)
        window = make_attention(1, 2, 4096, 4096, 128, profile=True, profile_tiles=8, profile_blocks=1,
                                target="sm_90a", use_cache=False).compiled
        every = make_attention(1, 2, 4096, 4096, 128, profile=True, profile_tiles=None, profile_blocks=1,
                               target="sm_90a", use_cache=False).compiled
        plain = make_attention(1, 2, 4096, 4096, 128, target="sm_90a", use_cache=False).compiled
    w_ops, e_ops, p_ops = opcodes(window.sass), opcodes(every.sass), opcodes(plain.sass)
    def records(sass):
        return len(re.findall(r"@!?P\d+\s+STG\.E\.64\b", sass))
    assert records(window.sass) == records(every.sass) > 0
    hgmma = count(p_ops, r"HGMMA\..*")
    assert count(e_ops, r"HGMMA\..*") == hgmma  # every tile recorded: the plain kernel's loops
    # two more copies of the unmasked loop (before and after the window), each one tile's HGMMAs
    # times ptxas's peeling: more HGMMA in all, and no wgmma serialized
    assert count(w_ops, r"HGMMA\..*") > hgmma
    assert "serialized" not in window.ptxas_log and window.resources.spill_stores_bytes == 0
    assert window.profiler.capacity < every.profiler.capacity


@pytest.mark.parametrize("bad", [0, -1, 2.5, "8", True])
def test_attention_profile_tiles_must_be_a_positive_int_or_none(bad):
    from mgpu_lab.arguments import ArgumentError
    from mgpu_lab.kernels.attention import make_attention

    with pytest.raises(ArgumentError, match=r"attention: profile_tiles must be an int >= 1 \(K/V tiles a consumer "
                                            r"records per work item\), None \(every tile\) or 'auto', got "):
        make_attention(1, 2, 512, 512, 128, profile=True, profile_tiles=bad)
