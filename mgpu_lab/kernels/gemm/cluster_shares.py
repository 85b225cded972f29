"""Which B tiles the blocks of a multicast cluster can split between them: the rule the tiling's
check (tiling.py) refuses a cluster by and the configuration model (model.py) offers clusters by,
so the two cannot drift apart. Pure Python (the model imports it without MLIR)."""

from __future__ import annotations


def pairs_split_b(tile_n: int, b_k_major: bool, parts: int = 2) -> bool:
    """`parts` blocks sharing B (cluster_m=parts) can split a B tile this wide: each loads its
    share of the rows of B (n, k) (8-row multiples, where the 128-byte swizzle repeats), or of its
    64-column boxes of B (k, n) (pairs: two each, or two and one; four blocks: one each). A
    swapped tiling's B is the caller's A (m, k): K-major."""
    if b_k_major:
        return 16 * parts <= tile_n <= 256 and tile_n % (8 * parts) == 0
    return tile_n in ((128, 192, 256) if parts == 2 else (64 * parts,))


__all__ = ["pairs_split_b"]
