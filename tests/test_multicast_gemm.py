"""CPU tests of the 2-block-cluster multicast GEMM (examples/gemm_multicast.py): B tiles arrive
by TMA multicast, slots are released in both blocks (remote mbarrier arrivals), the SASS is as
clean as gemm.py's (no local memory, no spills, 168 registers), and bad shapes are explained."""

from __future__ import annotations

import re

import pytest

from mgpu_lab.examples.gemm_multicast import make_gemm_multicast


def opcodes(sass: str) -> list[str]:
    return re.findall(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", sass)


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("tile_n", [256, 192, 128])
def test_gemm_multicast_sass(transpose_b, tile_n):
    n = 3840 if tile_n == 192 else 4096
    k = make_gemm_multicast(4096, n, 4096, transpose_b=transpose_b, tile_n=tile_n)
    sass, ptx = k.compiled.sass, k.compiled.ptx
    ops = opcodes(sass)
    assert re.search(rf"HGMMA\.64x{tile_n}x16\.F32\.BF16", sass)
    assert "UTMALDG.2D.MULTICAST" in ops and "UTMALDG.2D" in ops and "UTMASTG.2D" in ops  # B shared, A own
    assert "SYNCS.ARRIVE.TRANS64.RED.A1T0" in ops  # slot releases into the peer block
    assert "mapa.shared::cluster.u32" in ptx
    assert "UCGABAR_ARV" in ops and "UCGABAR_WAIT" in ops
    assert not any(op.startswith(("LDL", "STL")) for op in ops), "local memory in the GEMM"
    r = k.compiled.resources
    assert r.spill_stores_bytes == r.spill_loads_bytes == r.stack_frame_bytes == 0
    assert r.registers <= 168
    assert "serialized" not in k.compiled.ptxas_log
    assert k.compiled.cluster == (2, 1, 1)
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in re.sub(r"\s+", " ", sass)
    boxes = {d.box_shape for d in k.compiled.tma_descriptors}
    if transpose_b:
        assert (64, tile_n // 2) in boxes  # each block loads half of the B.T box
    elif tile_n // 64 % 2:
        assert (64, 32) in boxes  # odd chunk count: half of every chunk's k rows
    else:
        assert (64, 64) in boxes


def test_gemm_multicast_needs_row_tile_pairs():
    with pytest.raises(ValueError, match=r"m must be a multiple of 256 \(a cluster's 2 row tiles\), got 384"):
        make_gemm_multicast(384, 256, 64)
    with pytest.raises(ValueError, match=r"n must be a positive multiple of the tile's 256, got 320"):
        make_gemm_multicast(256, 320, 64)
