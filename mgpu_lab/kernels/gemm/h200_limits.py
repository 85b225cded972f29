"""What an H200 was measured to hold, read by the kernel's persistent grid (pieces.py) and the
configuration model (model.py) alike: one table, so the grid a tiling launches and the waves the
model counts for it cannot drift apart. Pure Python (the model imports it without MLIR)."""

from __future__ import annotations

H200_SMS = 132
# Clusters of 1, 2, ... one-SM blocks an H200 keeps resident at once (cuOccupancyMaxActiveClusters,
# benchmarks/probe_cluster_occupancy.py, cluster_occupancy_2026-12-05T035154Z): a cluster never
# straddles a GPC, so 32 clusters of 4 (128 blocks) would run in two waves.
H200_CLUSTERS = {1: 132, 2: 66, 3: 39, 4: 30, 5: 22, 6: 17, 7: 15, 8: 15}

__all__ = ["H200_CLUSTERS", "H200_SMS"]
