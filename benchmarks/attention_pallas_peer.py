"""Pallas Mosaic GPU's flash attention (jax.experimental.pallas.ops.gpu.attention_mgpu, FA3-style)
as a peer of mgpu_lab/kernels/attention.py, for bench_attention.py.

It takes float16 only and [batch, seq, heads, head_dim] arrays, applies no softmax scale (q is
pre-scaled here, outside the timing) and needs seq_q a multiple of 2 * block_q: every shape of
the sweep qualifies. It runs on JAX's own stream, so CUDA events on ours cannot bracket it:
both sides are timed by wall clock over batches of launches ended by a device synchronize,
alternating A B, B A, ... per round like common.interleaved_rounds. A few of its tuning
configurations are tried per shape; the fastest is the peer.

Keys: `attention_fwd_f16_d128_s4096_vs_pallas_mosaic` (peer ms / ours ms, above 1: ours faster),
`..._pallas_mosaic_ms`, `..._pallas_mosaic_config`, `..._pallas_mosaic_error` (a shape it refused).
"""

from __future__ import annotations

import os
import statistics
import time

# JAX would otherwise take 75% of the GPU's memory at import, next to torch's and CuPy's pools.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# (head_dim, seq, causal): a subset of bench_attention's sweep (each config compiles for seconds)
SHAPES = [(64, 1024, False), (128, 4096, False), (128, 4096, True), (128, 16384, False), (256, 4096, False)]
CONFIGS = {64: [(64, 128, 2), (64, 64, 4)], 128: [(64, 128, 2), (64, 64, 4)], 256: [(64, 64, 2)]}  # block_q, block_kv, steps
TOLERANCE = 2e-2


def _wall_ms(fn, sync, iters: int) -> float:
    """Milliseconds per call of `iters` back-to-back calls, ended by `sync`."""
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - t0) * 1e3 / iters


def _row(rows: list, *cells: str) -> tuple:
    """A table row as wide as the table's header (blank cells after `cells`)."""
    return cells + ("",) * (len(rows[0]) - len(cells)) if rows else cells


def _jax_side(fn, args: tuple):
    """(call, sync) for a jitted function: sync waits for the last call's result only."""
    import jax

    last = []

    def call():
        last[:] = [fn(*args)]

    def sync():
        if last:
            jax.block_until_ready(last[0])
    return call, sync


def _rounds(ours, theirs, sync_theirs, *, sync_ours, rounds: int, iters: int) -> tuple[float, float]:
    """(ours median ms, theirs median ms) over `rounds` rounds, the order flipping each round."""
    for fn, sync in ((ours, sync_ours), (theirs, sync_theirs)):  # warm-up
        _wall_ms(fn, sync, 3)
    a, b = [], []
    for r in range(rounds):
        order = [(ours, sync_ours, a), (theirs, sync_theirs, b)]
        for fn, sync, sink in order if r % 2 == 0 else order[::-1]:
            sink.append(_wall_ms(fn, sync, iters))
    return statistics.median(a), statistics.median(b)


def pallas_attention_peer(figures: dict, rows: list, tokens: int, model_width: int) -> None:
    """Time ours (float16) against Pallas Mosaic GPU's attention on SHAPES; add figures and rows."""
    import cupy
    import jax
    import jax.numpy as jnp
    import numpy as np

    from mgpu_lab.kernels.attention import make_attention
    try:
        from jax.experimental.pallas.ops.gpu import attention_mgpu as pallas_attention
    except Exception as e:  # noqa: BLE001 - a JAX without it: say so in the record, measure nothing
        figures["attention_pallas_mosaic_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        return
    rng = np.random.default_rng()
    for d, seq, causal in SHAPES:
        heads, batch = model_width // d, tokens // seq
        tag = f"attention_fwd_f16_d{d}_s{seq}" + ("_causal" if causal else "")
        host = [rng.standard_normal((batch, heads, seq, d), dtype=np.float32).astype(np.float16) for _ in range(3)]
        q, k, v = (cupy.asarray(x) for x in host)
        out = cupy.full((batch, heads, seq, d), np.nan, np.float16)
        lse = cupy.full((batch, heads, seq), np.nan, np.float32)
        kern = make_attention(batch, heads, seq, seq, d, causal=causal, dtype="float16")
        kern(q, k, v, out=(out, lse))
        # theirs: [batch, seq, heads, d], q pre-scaled (it applies no scale)
        scale = 1.0 / d ** 0.5
        jq, jk, jv = (jnp.asarray(np.ascontiguousarray(x.transpose(0, 2, 1, 3))) for x in
                      (host[0] * np.float16(scale), host[1], host[2]))
        best = None
        errors = []
        for block_q, block_kv, steps in CONFIGS[d]:
            try:
                config = pallas_attention.TuningConfig(block_q=block_q, block_kv=block_kv,
                                                       max_concurrent_steps=steps, causal=causal)
                fn = jax.jit(lambda a, b, c, config=config: pallas_attention.attention(a, b, c, config))
                result = jax.block_until_ready(fn(jq, jk, jv))
                theirs, sync_theirs = _jax_side(fn, (jq, jk, jv))
                ms = _wall_ms(theirs, sync_theirs, 5)
            except Exception as e:  # noqa: BLE001 - configurations it rejects are skipped and reported
                errors.append(f"{(block_q, block_kv, steps)}: {type(e).__name__}: {str(e)[:120]}")
                continue
            if best is None or ms < best[0]:
                best = (ms, (block_q, block_kv, steps), fn, result)
        if best is None:
            figures[f"{tag}_pallas_mosaic_error"] = errors[:2]
            rows.append(_row(rows, tag.removeprefix("attention_fwd_"), "-", "pallas: none ran"))
            continue
        _, config, fn, result = best
        theirs_out = np.asarray(result, dtype=np.float32).transpose(0, 2, 1, 3)
        ours_out = cupy.asnumpy(out).astype(np.float32)
        err = float(np.linalg.norm(ours_out - theirs_out) / np.linalg.norm(theirs_out))
        iters = 20 if seq < 16384 else 10
        ours_ms, theirs_ms = _rounds(lambda: kern.launch_unchecked(q, k, v, out, lse), *_jax_side(fn, (jq, jk, jv)),
                                     sync_ours=cupy.cuda.Device().synchronize, rounds=4, iters=iters)
        flops = 4.0 * batch * heads * seq * seq * d * (0.5 if causal else 1.0)
        figures.update({f"{tag}_vs_pallas_mosaic": theirs_ms / ours_ms, f"{tag}_pallas_mosaic_ms": theirs_ms,
                        f"{tag}_ours_wall_ms": ours_ms, f"{tag}_pallas_mosaic_config": list(config),
                        f"{tag}_rel_error_vs_pallas_mosaic": err})
        rows.append(_row(rows, tag.removeprefix("attention_fwd_"), f"{flops / ours_ms / 1e9:.0f}",
                         f"pallas {flops / theirs_ms / 1e9:.0f}", "", f"{theirs_ms / ours_ms:.3f}", "",
                         f"{err:.1e}" + (" WRONG" if not err < TOLERANCE else "")))
        print(" ".join(rows[-1]), flush=True)
        del q, k, v, out, lse, jq, jk, jv, best, fn, result
