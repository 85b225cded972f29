"""First call of a 4096^3 bf16 GEMM, ours against JAX Pallas Mosaic GPU, both cold in fresh processes.

Each sample is a new Python process, alternating ours and JAX in rounds (A B B A ...). In each
process the imports are timed, then the inputs are made and the GPU context initialised (not
timed: both sides pay it alike), then the timed part: build + compile + first launch + sync.
Nothing is cached: ours runs with an empty kernel cache and MGPU_LAB_NO_CACHE=1, JAX with its
persistent compilation cache off.

Run on a GPU machine:  python benchmarks/bench_first_call.py [--rounds 3] [--size 4096]
Writes a record `first_call_<UTC time>_<commit>.json` (or under $OUT). Keys:
`first_call_ours_vs_pallas_mosaic` (median ratio, lower is better), `*_first_call_s_median`,
`*_import_s_median`, and every sample.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from common import GpuSampler, table, write_record

OURS = textwrap.dedent("""
    import json, time
    t0 = time.perf_counter()
    import cupy, numpy as np, ml_dtypes
    from mgpu_lab.kernels.gemm import make_gemm
    imports = time.perf_counter() - t0
    n = {size}
    rng = np.random.default_rng(0)
    a = cupy.asarray(rng.standard_normal((n, n), dtype=np.float32).astype(ml_dtypes.bfloat16))
    b = cupy.asarray(rng.standard_normal((n, n), dtype=np.float32).astype(ml_dtypes.bfloat16))
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    k = make_gemm(n, n, n, use_cache=False)
    c = k(a, b)
    cupy.cuda.Device().synchronize()
    first = time.perf_counter() - t0
    print(json.dumps({{"import_s": imports, "first_call_s": first, "finite": bool(cupy.isfinite(c).all())}}))
""")

JAX = textwrap.dedent("""
    import json, time, dataclasses, inspect
    t0 = time.perf_counter()
    import jax, jax.numpy as jnp
    from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hm
    imports = time.perf_counter() - t0
    try:
        jax.config.update("jax_enable_compilation_cache", False)
    except AttributeError:  # older JAX: no persistent cache unless a cache dir is set
        pass
    n = {size}
    ka, kb = jax.random.split(jax.random.key(0))
    a = jax.random.normal(ka, (n, n), jnp.bfloat16)
    b = jax.random.normal(kb, (n, n), jnp.bfloat16)
    jax.block_until_ready((a, b))
    fields = {{f.name for f in dataclasses.fields(hm.TuningConfig)}}
    takes_c = "c" in inspect.signature(hm.matmul).parameters
    # The configuration closest to ours first (128x256x64 tiles, 4 stages), then smaller ones
    # should it not fit; failed attempts are counted (they warm JAX up, to its advantage).
    failed = []
    for tile_n, steps in ((256, 4), (256, 3), (128, 4)):
        want = dict(tile_m=128, tile_n=tile_n, tile_k=64, max_concurrent_steps=steps, epi_tile_n=64, epi_tile_m=64,
                    grid_minor_dim=hm.MatmulDimension.N, grid_tile_width=8, wg_dimension=hm.MatmulDimension.N,
                    cluster_dimension=None)
        config = hm.TuningConfig(**{{k: v for k, v in want.items() if k in fields}})
        t0 = time.perf_counter()
        try:
            f = jax.jit(lambda x, y: hm.matmul(x, y, None, config=config) if takes_c else hm.matmul(x, y, config=config))
            c = jax.block_until_ready(f(a, b))
        except Exception as e:  # noqa: BLE001 - a configuration that does not fit
            failed.append(f"{{tile_n}}x{{steps}}: {{type(e).__name__}}")
            continue
        first = time.perf_counter() - t0
        break
    else:
        raise SystemExit(f"no Pallas configuration compiled: {{failed}}")
    print(json.dumps({{"import_s": imports, "first_call_s": first, "finite": bool(jnp.isfinite(c).all()),
                      "failed_configs_before": failed}}))
""")


def sample(code: str, env: dict) -> dict:
    """Run one fresh process; its last stdout line is its JSON result."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"a first-call process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (ours, JAX) or (JAX, ours)")
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args()
    samples: dict[str, list[dict]] = {"ours": [], "pallas_mosaic": []}
    order = []
    with tempfile.TemporaryDirectory() as cache, GpuSampler() as gpu:
        env = {**os.environ, "MGPU_LAB_NO_CACHE": "1", "MGPU_LAB_CACHE_DIR": cache,
               "JAX_ENABLE_COMPILATION_CACHE": "false", "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
               "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                              os.environ.get("PYTHONPATH", "")])}
        for r in range(args.rounds):
            for side in (("ours", "pallas_mosaic") if r % 2 == 0 else ("pallas_mosaic", "ours")):
                code = (OURS if side == "ours" else JAX).format(size=args.size)
                samples[side].append(sample(code, env))
                order.append(side)
    if not all(s["finite"] for side in samples.values() for s in side):
        raise SystemExit("a first call produced non-finite values")
    figures: dict = {"size": args.size, "rounds": args.rounds}
    for side, runs in samples.items():
        figures[f"{side}_first_call_s_median"] = statistics.median(s["first_call_s"] for s in runs)
        figures[f"{side}_import_s_median"] = statistics.median(s["import_s"] for s in runs)
        figures[f"{side}_first_call_s_samples"] = [s["first_call_s"] for s in runs]
        figures[f"{side}_import_s_samples"] = [s["import_s"] for s in runs]
    figures["first_call_ours_vs_pallas_mosaic"] = (figures["ours_first_call_s_median"]
                                                   / figures["pallas_mosaic_first_call_s_median"])
    figures["first_call_with_imports_ours_vs_pallas_mosaic"] = (
        (figures["ours_first_call_s_median"] + figures["ours_import_s_median"])
        / (figures["pallas_mosaic_first_call_s_median"] + figures["pallas_mosaic_import_s_median"]))
    figures["pallas_mosaic_failed_configs_before"] = [s.get("failed_configs_before") for s in samples["pallas_mosaic"]]
    path = write_record("first_call", figures, notes={"order": order, "cold": "fresh process each, no caches"},
                        sampler=gpu)
    rows = [("side", "imports s (median)", "build+first call s (median)", "samples")]
    for side in samples:
        rows.append((side, f"{figures[f'{side}_import_s_median']:.2f}", f"{figures[f'{side}_first_call_s_median']:.2f}",
                     ", ".join(f"{s:.2f}" for s in figures[f"{side}_first_call_s_samples"])))
    print(table(rows))
    print(f"first_call_ours_vs_pallas_mosaic = {figures['first_call_ours_vs_pallas_mosaic']:.3f} "
          f"(with imports {figures['first_call_with_imports_ours_vs_pallas_mosaic']:.3f}); record: {path}")


if __name__ == "__main__":
    main()
