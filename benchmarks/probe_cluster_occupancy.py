"""How many clusters of 1..8 blocks an H200 keeps resident at once (cuOccupancyMaxActiveClusters),
for blocks that take one SM each (a GEMM block's 384 threads and ~200 KB of smem).

The performance model (`mgpu_lab/kernels/gemm/model.py`, `CLUSTERS_RESIDENT`) counts the waves
of cluster split-K from these numbers: a cluster never straddles a GPC, so clusters of 3+ leave
SMs idle, and a grid of 32 clusters of 4 runs in two waves where 128 blocks would seem to fit.

The library asks the same question at run time (`mgpu_lab.runtime.device.resident_clusters`,
a stand-in kernel with the GEMM's block size and shared memory). Run on a GPU machine:
    python benchmarks/probe_cluster_occupancy.py
Writes `cluster_occupancy_<time>_<commit>.json` (under $OUT when set) and prints a table.
"""

from __future__ import annotations

from common import table, write_record

from mgpu_lab.runtime.device import resident_clusters, sm_count

SMEM_BYTES = (100 * 1024, 200 * 1024, 227 * 1024)


def main() -> None:
    figures: dict = {"sms": sm_count()}
    rows = [("cluster size", *(f"{s // 1024} KB smem" for s in SMEM_BYTES))]
    for size in range(1, 9):
        counts = [resident_clusters(size, smem) for smem in SMEM_BYTES]
        for smem, count in zip(SMEM_BYTES, counts):
            figures[f"clusters_of_{size}_at_{smem // 1024}kb"] = count
        rows.append((size, *(f"{c} ({c * size} SMs)" for c in counts)))
    write_record("cluster_occupancy", figures)
    print(table(rows))


if __name__ == "__main__":
    main()
