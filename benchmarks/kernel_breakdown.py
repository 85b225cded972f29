"""Where a forward's GPU time goes, ours against torch's: the device kernels of one call each, from
torch.profiler (CUPTI sees every kernel on the context, ours launched through the driver too),
split into GEMMs and the rest, the GPU's busy time against the span, and GEMM time per shape.

The i-th GEMM kernel of our forward and of torch's come from the same nn.Linear (the module order
is the same). Where the two counts match, one kernel per Linear on both sides, each of our kernels
(named by its shape: `gemm_nt_2048x5632x2048`, ...) gets torch's time of the same calls beside
it; where they do not (cuBLAS split-K adds a reduce kernel), only the totals are compared.

    ours = profiled_kernels(lambda: model_ours(ids), torch.cuda.synchronize)
    theirs = profiled_kernels(lambda: model_torch(ids), torch.cuda.synchronize)
    figures.update(breakdown_figures("hf_llama_prefill_4x512", ours, theirs))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Kernel = tuple[float, float, str]  # (start us, end us, name)
# cuBLAS / CUTLASS GEMM kernels and their split-K reduce (torch's side); ours are named gemm_*
TORCH_GEMM_MARKS = ("gemm", "xmma", "cutlass", "nvjet", "splitkreduce")


def is_gemm(name: str, ours: bool) -> bool:
    """Whether a kernel is a GEMM's: ours are named gemm_<layout>_<shape>...; torch's by cuBLAS's names."""
    if ours:
        return name.startswith("gemm_")
    low = name.lower()
    return any(mark in low for mark in TORCH_GEMM_MARKS)


def busy_us(kernels: Sequence[Kernel]) -> float:
    """Time the GPU ran at least one of the kernels (the union of their intervals)."""
    total, end = 0.0, float("-inf")
    for start, stop, _ in sorted(kernels):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def side_figures(kernels: Sequence[Kernel], ours: bool) -> dict[str, float]:
    """GEMM and other kernel time, busy time and span (first start to last end) of one call."""
    if not kernels:
        return {"kernels": 0}
    gemm = [k for k in kernels if is_gemm(k[2], ours)]
    return {"kernels": len(kernels), "gemm_kernels": len(gemm), "gemm_us": sum(e - s for s, e, _ in gemm),
            "other_us": sum(e - s for s, e, name in kernels if not is_gemm(name, ours)),
            "busy_us": busy_us(kernels), "span_us": max(e for _, e, _ in kernels) - min(s for s, _, _ in kernels)}


def per_shape(ours: Sequence[Kernel], theirs: Sequence[Kernel]) -> dict[str, dict[str, float]] | None:
    """{our kernel name: calls, ours_us, torch_us} pairing the i-th GEMMs of both calls, or None
    when the GEMM counts differ (the calls cannot be paired)."""
    our_gemms = [k for k in sorted(ours) if is_gemm(k[2], True)]
    their_gemms = [k for k in sorted(theirs) if is_gemm(k[2], False)]
    if len(our_gemms) != len(their_gemms):
        return None
    table: dict[str, dict[str, float]] = {}
    for (s0, e0, name), (s1, e1, _) in zip(our_gemms, their_gemms):
        row = table.setdefault(name, {"calls": 0, "ours_us": 0.0, "torch_us": 0.0})
        row["calls"] += 1
        row["ours_us"] += e0 - s0
        row["torch_us"] += e1 - s1
    for row in table.values():
        row["torch_over_ours"] = row["torch_us"] / row["ours_us"] if row["ours_us"] else float("nan")
    return table


def breakdown_figures(prefix: str, ours: Sequence[Kernel], theirs: Sequence[Kernel]) -> dict[str, Any]:
    """Record figures: `<prefix>_breakdown_ours_gemm_us`, ..._torch_..., the GEMM ratio
    (`..._gemm_torch_over_ours`: above 1, our GEMMs took less GPU time) and the per-shape table."""
    a, b = side_figures(ours, True), side_figures(theirs, False)
    out: dict[str, Any] = {f"{prefix}_breakdown_ours_{k}": v for k, v in a.items()}
    out.update({f"{prefix}_breakdown_torch_{k}": v for k, v in b.items()})
    if a.get("gemm_us") and b.get("gemm_us"):
        out[f"{prefix}_breakdown_gemm_torch_over_ours"] = b["gemm_us"] / a["gemm_us"]
    shapes = per_shape(ours, theirs)
    out[f"{prefix}_breakdown_per_shape"] = shapes if shapes is not None else \
        f"not paired: {a.get('gemm_kernels', 0)} GEMM kernels of ours, {b.get('gemm_kernels', 0)} of torch's"
    return out


def profiled_kernels(fn: Callable[[], Any], sync: Callable[[], None]) -> list[Kernel]:
    """The device kernels of one `fn()` call, (start us, end us, name) in launch order (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        sync()
    kernels = []
    for event in prof.events():
        if str(getattr(event, "device_type", "")).endswith("CUDA") and event.time_range.end > event.time_range.start:
            kernels.append((float(event.time_range.start), float(event.time_range.end), event.name))
    return sorted(kernels)
