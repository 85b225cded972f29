"""Diagnostic (not a benchmark record): where does the attention profiler's cost come from?

Builds the attention kernel (d 128, seq 8192, batch 2, 16 heads) as plain and as profiled
variants with parts of the device profiler switched off by patching `DeviceProfiler`, times all
of them interleaved, and reads per-block lifetimes and between-block gaps from the traces.
    python benchmarks/probe_attention_profiler.py
"""
from __future__ import annotations

import json
import os
import sys
import warnings
from statistics import median

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from bench_profiler import attention_arrays  # noqa: E402
from common import GpuSampler, interleaved_runs  # noqa: E402

from mgpu_lab.builder import profiling as prof  # noqa: E402
from mgpu_lab.kernels.attention import make_attention  # noqa: E402

ORIG = {name: getattr(prof.DeviceProfiler, name) for name in ("_record",)}


NOREC = {"_record": lambda self, name, begin, when=None: None}
VARIANTS = {
    # name: (profile kwargs or None for plain, patches)
    "plain": (None, {}),
    "default": ({}, {}),  # every 16th block records every tile
    "blocks32": ({"profile_blocks": 32}, {}),
    "blocks16_norec": ({}, NOREC),
    "all": ({"profile_tiles": None, "profile_blocks": 1}, {}),
    "all_norec": ({"profile_tiles": None, "profile_blocks": 1}, NOREC),
    "win_mid": ({"profile_tiles": 8, "profile_blocks": 1}, {}),
    "win_mid_norec": ({"profile_tiles": 8, "profile_blocks": 1}, NOREC),
}


def build(name, batch, heads, seq, d):
    kwargs, patches = VARIANTS[name]
    for attr, fn in ORIG.items():
        setattr(prof.DeviceProfiler, attr, patches.get(attr, fn))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if kwargs is None:
                return make_attention(batch, heads, seq, seq, d)
            return make_attention(batch, heads, seq, seq, d, profile=True, profile_buffer="global", **kwargs)
    finally:
        for attr, fn in ORIG.items():
            setattr(prof.DeviceProfiler, attr, fn)


def block_stats(trace):
    start, end, sm = trace.block_start_ns, trace.block_end_ns, trace.block_sm
    life = end - start
    gaps = []
    for s in np.unique(sm):
        order = np.argsort(start[sm == s])
        st, en = start[sm == s][order], end[sm == s][order]
        gaps += list(st[1:] - en[:-1])
    per_sm = np.bincount(sm)
    return {"life_us_median": float(np.median(life)) / 1e3, "life_us_p10": float(np.percentile(life, 10)) / 1e3,
            "life_us_p90": float(np.percentile(life, 90)) / 1e3,
            "gap_us_median": float(np.median(gaps)) / 1e3 if gaps else None,
            "gap_us_p90": float(np.percentile(gaps, 90)) / 1e3 if gaps else None,
            "blocks_per_sm_max": int(per_sm.max()), "blocks_per_sm_min": int(per_sm[per_sm > 0].min()),
            "span_us": float(end.max() - start.min()) / 1e3}


def main():
    import torch
    batch, heads, seq, d = 2, 16, 8192, 128
    names = sys.argv[1:] or list(VARIANTS)
    gen = torch.Generator(device="cuda").manual_seed(1)
    sets, out, lse = attention_arrays(torch, gen, batch, heads, seq, d)
    kernels = {n: build(n, batch, heads, seq, d) for n in names}
    fns = {n: (lambda k: (lambda i: k(*sets[i % 2], out=(out, lse))))(k) for n, k in kernels.items()}
    with GpuSampler() as gpu:
        runs, _ = interleaved_runs(fns, 6, warmup=3, iters=10)
    base = median(runs["plain"]) if "plain" in runs else None
    result = {"gpu": gpu.summary(), "variants": {}}
    for n in names:
        row = {"ms": median(runs[n]), "vs_plain": median(runs[n]) / base if base else None,
               "sass_lines": len(kernels[n].compiled.sass.splitlines()),
               "registers": kernels[n].compiled.resources.registers if hasattr(kernels[n].compiled, "resources") else None}
        if n != "plain":
            try:
                row.update(block_stats(kernels[n].last_trace))
            except Exception as e:  # noqa: BLE001 - a diagnostic: report and go on
                row["trace_error"] = repr(e)
        result["variants"][n] = row
    path = os.path.join(os.environ.get("OUT", "."), "probe_attention_profiler.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    for n, row in result["variants"].items():
        print(f"{n:24s} {row['ms']:.4f} ms  x{row['vs_plain'] or 0:.4f}  life {row.get('life_us_median', 0) or 0:.1f} us"
              f"  gap {row.get('gap_us_median', 0) or 0:.2f} us  sass {row['sass_lines']}")


if __name__ == "__main__":
    main()
