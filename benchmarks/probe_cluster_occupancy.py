"""How many clusters of 1..8 blocks an H200 keeps resident at once (cuOccupancyMaxActiveClusters),
for blocks that take one SM each (a GEMM block's 384 threads and ~200 KB of smem).

The performance model (`mgpu_lab/kernels/gemm/model.py`, `CLUSTERS_RESIDENT`) counts the waves
of cluster split-K from these numbers: a cluster never straddles a GPC, so clusters of 3+ leave
SMs idle, and a grid of 32 clusters of 4 runs in two waves where 128 blocks would seem to fit.

The query needs a kernel; the figure depends only on its resources, so a trivial PTX kernel
with the GEMM's block size and shared memory stands in. Run on a GPU machine:
    python benchmarks/probe_cluster_occupancy.py
Writes `cluster_occupancy_<time>_<commit>.json` (under $OUT when set) and prints a table.
"""

from __future__ import annotations

from common import table, write_record

PTX = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry stand_in() { ret; }
"""
THREADS = 384
SMEM_BYTES = (100 * 1024, 200 * 1024, 227 * 1024)


def max_active_clusters(driver, function, size: int, smem: int) -> int:
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = size * 64, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = THREADS, 1, 1
    config.sharedMemBytes = smem
    attr = driver.CUlaunchAttribute()
    attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = size, 1, 1
    config.attrs = [attr]
    config.numAttrs = 1
    err, count = driver.cuOccupancyMaxActiveClusters(function, config)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuOccupancyMaxActiveClusters(cluster of {size}, {smem} B smem): {err}")
    return int(count)


def main() -> None:
    import cupy
    from cuda.bindings import driver

    cupy.cuda.runtime.free(0)  # a current context
    err, module = driver.cuModuleLoadData(PTX.encode() + b"\0")
    assert err == driver.CUresult.CUDA_SUCCESS, err
    err, function = driver.cuModuleGetFunction(module, b"stand_in")
    assert err == driver.CUresult.CUDA_SUCCESS, err
    for key, value in ((driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, max(SMEM_BYTES)),
                       (driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)):
        (err,) = driver.cuFuncSetAttribute(function, key, value)
        assert err == driver.CUresult.CUDA_SUCCESS, err
    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    figures: dict = {"sms": sms}
    rows = [("cluster size", *(f"{s // 1024} KB smem" for s in SMEM_BYTES))]
    for size in range(1, 9):
        counts = [max_active_clusters(driver, function, size, smem) for smem in SMEM_BYTES]
        for smem, count in zip(SMEM_BYTES, counts):
            figures[f"clusters_of_{size}_at_{smem // 1024}kb"] = count
        rows.append((size, *(f"{c} ({c * size} SMs)" for c in counts)))
    write_record("cluster_occupancy", figures)
    print(table(rows))


if __name__ == "__main__":
    main()
