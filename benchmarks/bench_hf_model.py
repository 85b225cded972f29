"""A Hugging Face Llama with every nn.Linear routed to our GEMM, against the same model on torch's own
linear (cuBLAS), prefill and greedy decode, interleaved in rounds (A B B A ...) on the same GPU.

The model: `transformers.LlamaForCausalLM` built from a config with random weights (no download):
bf16, 8 layers, hidden 2048, intermediate 5632, 16 heads / 4 KV heads (GQA), vocab 32000, torch's
SDPA attention. Two model objects share every weight tensor (a deep copy whose parameters are the
original's); in one, each Linear's forward calls our GEMM as a torch op, one op per (m, n, k)
built on first use (`mgpu_lab.kernels.gemm.route_linears`'s router, torch_linear.py; the model's
weight is B, (n, k), transpose_b=True).

Phases (each skipped once --budget-s is spent; a failing phase is recorded and the run goes on):
- prefill: one forward of batch x length tokens (default 4 x 512), logits of every position;
- decode (per --decode-batch): a manual greedy loop, the short prompt's forward then --new-tokens
  - 1 single-token forwards on the KV cache (argmax on the GPU, no host sync inside), the same
  code on both sides; timed per whole generation (prompt included), reported per token too;
- prefill with CUDA graphs (unless --no-graph-prefill): the same forward captured once per side and
  replayed, `hf_llama_prefill_graph_<B>x<L>_vs_torch`: the forward's GPU time, GEMMs and all between
  them, without the host-bound gaps that move the eager prefill's figure between runs;
- decode with CUDA graphs (per --graph-decode-batch): as a server runs it, a static KV cache and
  each single-token step one replay of a graph captured once per side (GraphDecoder): the host's
  Python out of the loop, the GEMMs' GPU time in it. `hf_llama_decode_graph_b<B>_vs_torch`.
In each phase: the first call of ours is timed on its own (it builds the phase's new shapes; the
kernel cache starts empty unless --warm-cache: what a new user's first forward costs), with the
build seconds of each shape; the logits compared with torch's (max |ours - torch| / max |torch|
and the normwise relative error; prefill also gives torch's own bf16 error against an f32 copy of
the model, the noise floor); a phase whose normwise error exceeds --tolerance is not timed; then
CUDA-event medians over A B B A rounds after warm-up, SM clock and power sampled during the phase.
After the timing, one more call per side runs under torch.profiler (kernel_breakdown.py): GEMM and
other kernel time, the GPU's busy time against the span (host-bound gaps), GEMM time per shape;
then the host time of a call (prefill forward, eager generation) on each side and cProfile's top
functions of ours.

Ratios are speedups, as the GEMM records: `hf_llama_prefill_4x512_vs_torch` and
`hf_llama_decode_b<B>_vs_torch` are torch's median time / ours (above 1: ours faster).

Run on a GPU machine:  python benchmarks/bench_hf_model.py [--decode-batch 1 4] [--budget-s 900]
Writes a record `hf_model_<UTC time>_<commit>.json` (or under $OUT) and prints a table last.
`--gemm torch` routes the same way to torch's F.linear (keys `hf_llama_router_*`): a control that
prices the router itself, so a gap of ours that the control shares is not our op's.
`--tune auto` builds each shape with make_gemm(..., tune="auto") (keys `hf_llama_tuned_*`): the
model's top few and its pick's cluster twin timed once per shape, what a user serving one model
would do; the default keys are the model's picks, no timing at build.
On a CPU, `--cpu-dry-run` runs the same steps on a tiny Llama with F.linear standing in for our
GEMM and wall-clock timing, writing its record to a temporary folder (a smoke test of the script).
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parent.parent))  # this checkout's mgpu_lab, also without PYTHONPATH
from common import GpuSampler, interleaved_rounds, interleaved_runs, table, write_record  # noqa: E402
from gemm_random import shape_gpu_figures  # noqa: E402
from kernel_breakdown import breakdown_figures, profiled_kernels  # noqa: E402

from mgpu_lab.kernels.gemm.torch_linear import GemmFactory, LinearRouter, gemm_linear_op  # noqa: E402

LLAMA = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8, num_attention_heads=16,
             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=4096)
TINY_LLAMA = dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=96, max_position_embeddings=256)
PREFIX = "hf_llama"


# --------------------------------------------------------------------------- the models

def build_models(config_values: dict, device: str, dtype: Any, seed: int = 0) -> tuple[Any, Any]:
    """(torch's model, a second model object sharing every parameter tensor with it), eval mode."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(**config_values)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype).eval()
    twin = copy.deepcopy(model, memo={id(p): p for p in model.parameters()})  # modules and buffers copied
    return model, twin


def _forward_keywords(model: Any) -> tuple[str, dict]:
    """(the KV cache's keyword, the keep-only-the-last-logits argument) of this transformers'
    forward: version 5 renamed `past_key_values` to `cache`; before 4.50 `logits_to_keep` was
    `num_logits_to_keep`."""
    import inspect

    names = inspect.signature(model.forward).parameters
    cache = "cache" if "cache" in names else "past_key_values"
    keep = next(({name: 1} for name in ("logits_to_keep", "num_logits_to_keep") if name in names), {})
    return cache, keep


def greedy_decode(model: Any, prompt: Any, new_tokens: int) -> tuple[Any, Any]:
    """(the new tokens (batch, new_tokens), the prompt's last-position logits): the prompt's forward,
    then one forward per token on the KV cache, argmax on the GPU (no host sync in the loop)."""
    import torch

    cache_keyword, last_only = _forward_keywords(model)
    out = model(input_ids=prompt, use_cache=True, **last_only)
    first_logits = out.logits[:, -1]
    token = first_logits.argmax(-1, keepdim=True)
    tokens = [token]
    for _ in range(new_tokens - 1):
        cache = out.get("cache") if out.get("cache") is not None else out.get("past_key_values")
        out = model(input_ids=token, use_cache=True, **last_only, **{cache_keyword: cache})
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens.append(token)
    return torch.cat(tokens, dim=1), first_logits


class GraphDecoder:
    """A serving-style greedy decode: a static KV cache (prompt + new tokens long), the prompt's
    forward run eagerly, then every single-token step as one CUDA graph replay (captured once per
    model and batch; on a CPU, `capture=False`, the same steps run eagerly). The step reads the
    token and position from device buffers and writes the next ones there, so a replay needs
    nothing from the host: what a serving loop runs, host cost out of the picture."""

    def __init__(self, model: Any, batch: int, prompt_len: int, new_tokens: int, device: str, capture: bool):
        import inspect

        import torch
        from transformers import StaticCache

        self.model, self.new_tokens, self.prompt_len = model, new_tokens, prompt_len
        self.cache_keyword, self.last_only = _forward_keywords(model)
        options = inspect.signature(StaticCache.__init__).parameters
        extra = {k: v for k, v in (("max_batch_size", batch), ("device", device), ("dtype", model.dtype))
                 if k in options}  # transformers before 5 sized the cache up front
        self.cache = StaticCache(config=model.config, max_cache_len=prompt_len + new_tokens, **extra)
        zeros = functools.partial(torch.zeros, dtype=torch.long, device=device)
        self.token, self.position = zeros((batch, 1)), zeros(1)
        self.tokens = zeros((batch, new_tokens))
        self.graph = None
        if capture:
            self.prefill(torch.zeros((batch, prompt_len), dtype=torch.long, device=device))
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture, as torch's CUDA-graph notes ask
                self.step()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.step()

    def _forward(self, ids: Any, positions: Any) -> Any:
        return self.model(input_ids=ids, use_cache=True, cache_position=positions, **self.last_only,
                          **{self.cache_keyword: self.cache})

    def step(self) -> None:
        """One token: the forward at the current position, argmax into the buffers, all on the GPU."""
        logits = self._forward(self.token, self.position).logits[:, -1]
        following = logits.argmax(-1, keepdim=True)
        self.token.copy_(following)
        self.tokens.index_copy_(1, self.position - (self.prompt_len - 1), following)  # the token's column
        self.position.add_(1)

    def prefill(self, prompt: Any) -> Any:
        """The prompt's forward into the emptied static cache (its fill counters back to 0: the
        cache counts the positions it holds on the device); returns its last-position logits."""
        import torch

        self.cache.reset()
        first = self._forward(prompt, torch.arange(prompt.shape[1], device=prompt.device)).logits[:, -1]
        token = first.argmax(-1, keepdim=True)
        self.token.copy_(token)
        self.tokens[:, :1].copy_(token)
        self.position.fill_(prompt.shape[1])
        return first

    def generate(self, prompt: Any) -> tuple[Any, Any]:
        """(the new tokens (batch, new_tokens), the prompt's last-position logits), as greedy_decode."""
        first = self.prefill(prompt)
        for _ in range(self.new_tokens - 1):
            if self.graph is None:
                self.step()
            else:
                self.graph.replay()
        return self.tokens, first


class GraphForward:
    """One forward of fixed (batch, length) input ids as a CUDA graph replay, captured once (on a
    CPU, `capture=False`, the forward runs eagerly): the prefill's GPU work with the host's Python
    out of the picture, what a server that captures its prefill shapes runs. Each call copies the
    ids into the graph's static buffer; the logits it returns are the graph's own buffer."""

    def __init__(self, model: Any, shape: tuple[int, int], device: str, capture: bool):
        import torch

        self.model = model
        self.ids = torch.zeros(shape, dtype=torch.long, device=device)
        self.graph, self.logits = None, None
        if capture:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture (it also builds every shape)
                self._forward()
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.logits = self._forward()

    def _forward(self) -> Any:
        return self.model(input_ids=self.ids, use_cache=False).logits

    def __call__(self, ids: Any) -> Any:
        self.ids.copy_(ids)
        if self.graph is None:
            return self._forward()
        self.graph.replay()
        return self.logits


# --------------------------------------------------------------------------- comparisons, timers

def logits_errors(got: Any, want: Any) -> dict[str, float]:
    """max |got - want| / max |want|, and the normwise relative error, in f32."""
    got, want = got.float(), want.float()
    return {"max_rel_error": float((got - want).abs().max() / want.abs().max()),
            "rel_error": float((got - want).norm() / want.norm())}


@dataclass
class _Runs:
    runs_ms: tuple[float, ...]


def wall_timer(warmup: int, iters: int) -> Callable[[Callable[[int], object]], _Runs]:
    """A `timer(fn)` for common.interleaved_rounds on a CPU (the dry run): wall ms per call."""
    def timer(fn: Callable[[int], object]) -> _Runs:
        for i in range(warmup):
            fn(i)
        runs = []
        for i in range(iters):
            t0 = time.perf_counter()
            fn(warmup + i)
            runs.append((time.perf_counter() - t0) * 1e3)
        return _Runs(tuple(runs))
    return timer


@dataclass
class Setup:
    """What every phase needs: both models, the router, how to synchronize and time, the options."""

    torch_model: Any
    ours_model: Any
    router: LinearRouter
    sync: Callable[[], None]
    timer: Callable | None  # None: CUDA events (common.interleaved_rounds' default)
    device: str
    vocab: int
    args: argparse.Namespace


def first_call(s: Setup, fn: Callable[[], Any]) -> tuple[Any, float, dict[str, float]]:
    """(fn's result, its wall seconds until the GPU is done, the build seconds of each shape it made)."""
    before = set(s.router.build_s)
    s.sync()
    t0 = time.perf_counter()
    result = fn()
    s.sync()
    seconds = time.perf_counter() - t0
    built = {name: sec for (key, sec), name in zip(s.router.build_s.items(), s.router.shapes_built())
             if key not in before}
    return result, seconds, built


def interleave(s: Setup, ours: Callable[[int], object], theirs: Callable[[int], object], warmup: int,
               iters: int) -> Any:
    """A B B A ... rounds of ours and torch's (common.interleaved_rounds), CUDA events or the wall clock."""
    timer = s.timer(warmup, iters) if s.timer else None
    return interleaved_rounds(ours, theirs, s.args.rounds, warmup=warmup, iters=iters, timer=timer)


# --------------------------------------------------------------------------- phases

def prefill_inputs(s: Setup) -> list[Any]:
    """Two (batch, length) sets of token ids the prefill phases alternate between (the same in each)."""
    import torch

    gen = torch.Generator(device=s.device).manual_seed(1)
    shape = (s.args.prefill_batch, s.args.prefill_len)
    return [torch.randint(0, s.vocab, shape, generator=gen, device=s.device) for _ in range(2)]


def prefill_phase(s: Setup, figures: dict, rows: list) -> None:
    """One forward of batch x length tokens, every position's logits."""
    b, n = s.args.prefill_batch, s.args.prefill_len
    name = f"{PREFIX}_prefill_{b}x{n}"
    ids = prefill_inputs(s)
    ours_logits, ours_first_s, built = first_call(s, lambda: s.ours_model(input_ids=ids[0]).logits)
    torch_logits, torch_first_s, _ = first_call(s, lambda: s.torch_model(input_ids=ids[0]).logits)
    errors = logits_errors(ours_logits, torch_logits)
    figures.update(_first_call_figures(name, ours_first_s, torch_first_s, built))
    figures.update({f"{name}_{key}": value for key, value in errors.items()})
    figures.update(_noise_floor(s, name, ids[0], torch_logits))
    del ours_logits, torch_logits
    if not _close_enough(name, errors, figures, rows, s.args.tolerance):
        return
    with GpuSampler() as gpu:
        result = interleave(s, lambda i: s.ours_model(input_ids=ids[i % 2]),
                            lambda i: s.torch_model(input_ids=ids[i % 2]), warmup=2, iters=s.args.prefill_iters)
    speedup = result.b_ms / result.a_ms
    figures.update({f"{name}_vs_torch": speedup, f"{name}_ours_ms": result.a_ms, f"{name}_torch_ms": result.b_ms,
                    f"{name}_ours_tokens_per_s": b * n / result.a_ms * 1e3, **shape_gpu_figures(name, gpu.summary())})
    rows.append((f"prefill {b}x{n}", f"{result.a_ms:.2f} ms", f"{result.b_ms:.2f} ms", f"{speedup:.3f}",
                 f"{errors['max_rel_error']:.1e}", f"{ours_first_s:.1f} s ({len(built)} shapes)"))
    breakdown(s, name, lambda: s.ours_model(input_ids=ids[0]), lambda: s.torch_model(input_ids=ids[0]), figures)
    host_figures(s, name, lambda: s.ours_model(input_ids=ids[0]), lambda: s.torch_model(input_ids=ids[0]), figures)


def graph_prefill_phase(s: Setup, figures: dict, rows: list) -> None:
    """The prefill as one CUDA graph replay per side (GraphForward), the eager prefill phase's
    inputs: the forward's GPU time end to end (GEMMs and everything between them), free of the
    host-bound gaps that move the eager figure between runs."""
    b, n = s.args.prefill_batch, s.args.prefill_len
    name = f"{PREFIX}_prefill_graph_{b}x{n}"
    ids = prefill_inputs(s)
    capture = s.device == "cuda"
    ours, ours_first_s, built = first_call(s, lambda: GraphForward(s.ours_model, (b, n), s.device, capture))
    theirs = GraphForward(s.torch_model, (b, n), s.device, capture)
    errors = logits_errors(ours(ids[0]).clone(), theirs(ids[0]).clone())
    figures.update({f"{name}_capture_s": ours_first_s, f"{name}_shapes_built": len(built),
                    **{f"{name}_{key}": value for key, value in errors.items()}})
    if not _close_enough(name, errors, figures, rows, s.args.tolerance):
        return
    with GpuSampler() as gpu:
        result = interleave(s, lambda i: ours(ids[i % 2]), lambda i: theirs(ids[i % 2]), warmup=2,
                            iters=s.args.prefill_iters)
    speedup = result.b_ms / result.a_ms
    figures.update({f"{name}_vs_torch": speedup, f"{name}_ours_ms": result.a_ms, f"{name}_torch_ms": result.b_ms,
                    **shape_gpu_figures(name, gpu.summary())})
    rows.append((f"prefill {b}x{n}, CUDA graph", f"{result.a_ms:.2f} ms", f"{result.b_ms:.2f} ms", f"{speedup:.3f}",
                 f"{errors['max_rel_error']:.1e}", f"{ours_first_s:.1f} s capture ({len(built)} shapes)"))


def breakdown(s: Setup, name: str, ours: Callable[[], Any], theirs: Callable[[], Any], figures: dict) -> None:
    """One more call of each side under torch.profiler (after the timing, so it cannot disturb it):
    GEMM against other kernel time, the GPU's busy time against the span, GEMM time per shape
    (kernel_breakdown.py). GPU runs only; --no-breakdown skips it."""
    if s.device != "cuda" or s.args.no_breakdown:
        return
    try:
        figures.update(breakdown_figures(name, profiled_kernels(ours, s.sync), profiled_kernels(theirs, s.sync)))
    except Exception as e:  # noqa: BLE001 - a diagnostic: its failure is a figure, not the phase's
        figures[f"{name}_breakdown_error"] = f"{type(e).__name__}: {e}"
        return
    shapes = figures[f"{name}_breakdown_per_shape"]
    print(f"{name}: GEMM us ours {figures.get(f'{name}_breakdown_ours_gemm_us', 0):.0f}, torch "
          f"{figures.get(f'{name}_breakdown_torch_gemm_us', 0):.0f}; busy/span ours "
          f"{figures.get(f'{name}_breakdown_ours_busy_us', 0):.0f}/{figures.get(f'{name}_breakdown_ours_span_us', 0):.0f}"
          f", torch {figures.get(f'{name}_breakdown_torch_busy_us', 0):.0f}/"
          f"{figures.get(f'{name}_breakdown_torch_span_us', 0):.0f}")
    if isinstance(shapes, dict):
        print(table([("kernel", "calls", "ours us", "torch us", "torch / ours")] + [
            (k, v["calls"], f"{v['ours_us']:.1f}", f"{v['torch_us']:.1f}", f"{v['torch_over_ours']:.3f}")
            for k, v in sorted(shapes.items(), key=lambda kv: -kv[1]["ours_us"])]))


def host_figures(s: Setup, name: str, ours: Callable[[], Any], theirs: Callable[[], Any], figures: dict,
                 calls: int = 8) -> None:
    """Host time of one call (a prefill forward, a whole generation) on each side: from the call
    to its return, the GPU idle at the start (a synchronize before each), so the figure is what
    the Python side takes to enqueue the work; then the same right behind another call
    (`_steady_host_ms_`: no synchronize between them, as the timed rounds run them), which reads
    higher where a call waits for the GPU (a full launch queue, an implicit synchronize). Both in
    `calls` rounds, the sides interleaved A B B A (the host's speed drifts within a lease); then the
    functions that took most of our host time (cProfile, own time). A model this small is bound by
    its host side: this says which part of ours costs more. GPU runs only."""
    if s.device != "cuda" or s.args.no_breakdown:
        return
    import cProfile
    import pstats

    def host_timer(idle: bool) -> Callable[[Callable[[int], object]], _Runs]:
        """One call's ms from the call to its return, the GPU idle before it (idle), or right
        behind a first call whose work is still queued (back to back)."""
        def timer(fn: Callable[[int], object]) -> _Runs:
            s.sync()
            if not idle:
                fn(0)
            t0 = time.perf_counter()
            fn(1)
            elapsed = (time.perf_counter() - t0) * 1e3
            s.sync()
            return _Runs([elapsed])
        return timer

    sides = {"ours": lambda i: ours(), "torch": lambda i: theirs()}
    for key, idle in (("host_ms", True), ("steady_host_ms", False)):
        # the sides in rounds A B B A ...: the host's state drifts between calls (6.9-18 ms a forward in one lease)
        runs, _ = interleaved_runs(sides, rounds=calls, timer=host_timer(idle))
        for side, times in runs.items():
            figures[f"{name}_{key}_{side}"] = statistics.median(times)
    profile = cProfile.Profile()  # the GPU is idle: the loop above ended with a synchronize
    profile.enable()
    for _ in range(calls):
        ours()
    profile.disable()
    s.sync()
    stats = pstats.Stats(profile)
    top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:15]  # (file, line, fn) -> (cc, nc, tt, ct, callers)
    figures[f"{name}_host_profile_ours"] = [
        f"{tt / calls * 1e3:.3f} ms own, {ct / calls * 1e3:.3f} ms cumulative, {nc // calls} calls: "
        f"{Path(file).name}:{line} {fn}" for (file, line, fn), (cc, nc, tt, ct, _) in top]
    print(f"{name}: host ms per call, ours {figures[f'{name}_host_ms_ours']:.2f}, torch "
          f"{figures[f'{name}_host_ms_torch']:.2f}; back to back, ours {figures[f'{name}_steady_host_ms_ours']:.2f}, "
          f"torch {figures[f'{name}_steady_host_ms_torch']:.2f}; ours' top host functions:")
    print("\n".join(figures[f"{name}_host_profile_ours"]))


def _noise_floor(s: Setup, name: str, ids: Any, torch_logits: Any) -> dict[str, float]:
    """torch's own bf16 logits against an f32 copy of the model: the error any bf16 GEMM brings."""
    import torch

    if s.args.no_f32_reference:
        return {}
    try:
        f32 = copy.deepcopy(s.torch_model).float()
        reference = f32(input_ids=ids).logits
        del f32
        return {f"{name}_torch_vs_f32_{key}": value for key, value in logits_errors(torch_logits, reference).items()}
    except Exception as e:  # noqa: BLE001 - out of memory, say: the comparison is context, not a gate
        return {f"{name}_torch_vs_f32_error": f"{type(e).__name__}: {e}"}
    finally:
        if s.device == "cuda":
            torch.cuda.empty_cache()


def time_generations(s: Setup, name: str, ours: Callable[[int], object], theirs: Callable[[int], object],
                     figures: dict, rows: list, row: tuple[str, str, str]) -> None:
    """A B B A rounds of whole generations of --new-tokens (SM clock and power sampled), the
    figures (per generation and per token) and the table row (label, error, first call)."""
    new_tokens = s.args.new_tokens
    with GpuSampler() as gpu:
        result = interleave(s, ours, theirs, warmup=1, iters=s.args.decode_iters)
    speedup = result.b_ms / result.a_ms
    figures.update({f"{name}_vs_torch": speedup, f"{name}_ours_ms": result.a_ms, f"{name}_torch_ms": result.b_ms,
                    f"{name}_ours_ms_per_token": result.a_ms / new_tokens,
                    f"{name}_torch_ms_per_token": result.b_ms / new_tokens, **shape_gpu_figures(name, gpu.summary())})
    label, error, first = row
    rows.append((label, f"{result.a_ms / new_tokens:.2f} ms/token", f"{result.b_ms / new_tokens:.2f} ms/token",
                 f"{speedup:.3f}", error, first))


def decode_phase(s: Setup, batch: int, figures: dict, rows: list) -> None:
    """Greedy decode of --new-tokens after a --prompt-len prompt, the whole generation timed."""
    import torch

    name = f"{PREFIX}_decode_b{batch}"
    new_tokens = s.args.new_tokens
    gen = torch.Generator(device=s.device).manual_seed(2 + batch)
    prompts = [torch.randint(0, s.vocab, (batch, s.args.prompt_len), generator=gen, device=s.device)
               for _ in range(2)]
    (ours_tokens, ours_logits), ours_first_s, built = first_call(
        s, lambda: greedy_decode(s.ours_model, prompts[0], new_tokens))
    (torch_tokens, torch_logits), torch_first_s, _ = first_call(
        s, lambda: greedy_decode(s.torch_model, prompts[0], new_tokens))
    errors = logits_errors(ours_logits, torch_logits)
    figures.update(_first_call_figures(name, ours_first_s, torch_first_s, built))
    figures.update({f"{name}_prompt_logits_{key}": value for key, value in errors.items()})
    # greedy tokens of random weights may part at a near tie: reported, not a gate
    figures[f"{name}_tokens_matching_torch"] = float((ours_tokens == torch_tokens).float().mean())
    if not _close_enough(name, errors, figures, rows, s.args.tolerance):
        return
    time_generations(s, name, lambda i: greedy_decode(s.ours_model, prompts[i % 2], new_tokens),
                     lambda i: greedy_decode(s.torch_model, prompts[i % 2], new_tokens), figures, rows,
                     (f"decode b{batch}, {new_tokens} tokens", f"{errors['max_rel_error']:.1e}",
                      f"{ours_first_s:.1f} s ({len(built)} shapes)"))
    breakdown(s, name, lambda: greedy_decode(s.ours_model, prompts[0], new_tokens),
              lambda: greedy_decode(s.torch_model, prompts[0], new_tokens), figures)
    # the host time of a whole generation and where ours goes (a decode step is host-bound)
    host_figures(s, name, lambda: greedy_decode(s.ours_model, prompts[0], new_tokens),
                 lambda: greedy_decode(s.torch_model, prompts[0], new_tokens), figures, calls=4)


def graph_decode_phase(s: Setup, batch: int, figures: dict, rows: list) -> None:
    """The decode phase as a server runs it: a static KV cache and each token one CUDA graph replay
    (GraphDecoder), both sides; timed per whole generation (the eager prompt forward included)."""
    import torch

    name = f"{PREFIX}_decode_graph_b{batch}"
    new_tokens, capture = s.args.new_tokens, s.device == "cuda"
    gen = torch.Generator(device=s.device).manual_seed(2 + batch)  # the eager decode phase's prompts
    prompts = [torch.randint(0, s.vocab, (batch, s.args.prompt_len), generator=gen, device=s.device)
               for _ in range(2)]
    (ours, ours_first_s, built) = first_call(s, lambda: GraphDecoder(s.ours_model, batch, s.args.prompt_len,
                                                                     new_tokens, s.device, capture))
    theirs = GraphDecoder(s.torch_model, batch, s.args.prompt_len, new_tokens, s.device, capture)
    ours_tokens, ours_logits = (t.clone() for t in ours.generate(prompts[0]))
    torch_tokens, torch_logits = (t.clone() for t in theirs.generate(prompts[0]))
    eager_tokens, _ = greedy_decode(s.torch_model, prompts[0], new_tokens)
    errors = logits_errors(ours_logits, torch_logits)
    figures.update({f"{name}_capture_s": ours_first_s, f"{name}_shapes_built": len(built),
                    **{f"{name}_prompt_logits_{key}": value for key, value in errors.items()},
                    f"{name}_tokens_matching_torch": float((ours_tokens == torch_tokens).float().mean()),
                    # the static cache and the graph against torch's own eager loop: the harness's check
                    f"{name}_torch_tokens_matching_eager": float((torch_tokens == eager_tokens).float().mean())})
    if not _close_enough(name, errors, figures, rows, s.args.tolerance):
        return
    time_generations(s, name, lambda i: ours.generate(prompts[i % 2]), lambda i: theirs.generate(prompts[i % 2]),
                     figures, rows, (f"decode b{batch}, CUDA graphs", f"{errors['max_rel_error']:.1e}",
                                     f"{ours_first_s:.1f} s capture ({len(built)} shapes)"))


def _first_call_figures(name: str, ours_s: float, torch_s: float, built: dict[str, float]) -> dict:
    return {f"{name}_first_call_s": ours_s, f"{name}_torch_first_call_s": torch_s,
            f"{name}_shapes_built": len(built), f"{name}_build_s": sum(built.values()),
            f"{name}_build_s_per_shape": built}


def _close_enough(name: str, errors: dict[str, float], figures: dict, rows: list, tolerance: float) -> bool:
    """Whether the phase may be timed: our logits within `tolerance` (normwise) of torch's."""
    if errors["rel_error"] <= tolerance:
        return True
    figures[f"{name}_error"] = f"logits relative error {errors['rel_error']:.3g} > {tolerance}: not timed"
    rows.append((name, "WRONG", "", "", f"{errors['max_rel_error']:.1e}", ""))
    return False


# --------------------------------------------------------------------------- main

def stand_in_gemm(m: int, n: int, k: int, has_bias: bool, dtype: str) -> Callable[..., Any]:
    """For --cpu-dry-run and --gemm torch: F.linear's product in the routed path's place."""
    import torch.nn.functional as F

    return lambda x, weight, bias=None: F.linear(x, weight, bias)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefill-batch", type=int, default=4)
    parser.add_argument("--prefill-len", type=int, default=512)
    parser.add_argument("--decode-batch", type=int, nargs="*", default=[1, 4],
                        help="a decode phase per batch size (none: skip)")
    parser.add_argument("--no-graph-prefill", action="store_true",
                        help="skip the prefill as one CUDA graph replay per side (keys ..._prefill_graph_...)")
    parser.add_argument("--graph-decode-batch", type=int, nargs="*", default=[1, 4],
                        help="a decode phase per batch size with a static KV cache and each step a CUDA graph "
                             "replay (none: skip)")
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=6, help="A B B A ... rounds per phase")
    parser.add_argument("--prefill-iters", type=int, default=5, help="timed forwards per block")
    parser.add_argument("--decode-iters", type=int, default=2, help="timed generations per block")
    parser.add_argument("--layers", type=int, default=LLAMA["num_hidden_layers"])
    parser.add_argument("--tolerance", type=float, default=5e-2,
                        help="largest normwise relative error of our logits against torch's that is timed")
    parser.add_argument("--budget-s", type=float, default=None, help="start no new phase after this many seconds")
    parser.add_argument("--warm-cache", action="store_true",
                        help="keep the kernel cache (default: an empty one, so first calls build every shape)")
    parser.add_argument("--no-f32-reference", action="store_true", help="skip torch's bf16-vs-f32 noise floor")
    parser.add_argument("--no-breakdown", action="store_true",
                        help="skip the per-kernel breakdown (one profiled call per side after each phase's timing)")
    parser.add_argument("--gemm", choices=("ours", "torch"), default="ours",
                        help="what the routed model's linears call: our GEMM (default), or torch's F.linear through "
                             "the same router (a control: the router's own host cost, keys hf_llama_router_...)")
    parser.add_argument("--tune", choices=("auto",), default=None,
                        help="build each shape with make_gemm(..., tune='auto') (keys hf_llama_tuned_...): what a "
                             "user serving one model gets after timing its few shapes once")
    parser.add_argument("--cpu-dry-run", action="store_true",
                        help="a tiny Llama on the CPU, F.linear for our GEMM, wall-clock timing: a smoke test")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    global PREFIX
    args = parse_args(argv)
    control = args.gemm == "torch"
    if control and args.tune:
        raise SystemExit("--tune applies to our GEMM; --gemm torch routes to F.linear")
    if control:
        PREFIX = "hf_llama_router"  # F.linear behind the router: not our GEMM, so not hf_llama_*_vs_torch
    elif args.tune:
        PREFIX = "hf_llama_tuned"  # tune='auto' picks, beside the model's default picks (hf_llama_*)
    if not args.warm_cache and not args.cpu_dry_run:
        # before anything builds: every shape compiles in this run (the first forward a new user sees)
        os.environ["MGPU_LAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="mgpu_hf_bench_cache_")
    import torch

    dry = args.cpu_dry_run
    device = "cpu" if dry else "cuda"
    config_values = dict(TINY_LLAMA if dry else LLAMA)
    config_values["num_hidden_layers"] = min(args.layers, 2) if dry else args.layers
    factory: GemmFactory = stand_in_gemm if dry or control else functools.partial(gemm_linear_op, tune=args.tune)
    t0 = time.perf_counter()
    deadline = t0 + args.budget_s if args.budget_s is not None else float("inf")
    torch_model, ours_model = build_models(config_values, device, torch.bfloat16)
    router = LinearRouter(factory)
    figures: dict = {f"{PREFIX}_linears_routed": router.route(ours_model),
                     f"{PREFIX}_linears_total": sum(isinstance(m, torch.nn.Linear) for m in torch_model.modules()),
                     f"{PREFIX}_model_build_s": time.perf_counter() - t0}
    s = Setup(torch_model, ours_model, router, torch.cuda.synchronize if not dry else (lambda: None),
              wall_timer if dry else None, device, config_values["vocab_size"], args)
    rows: list = [("phase", "ours", "torch", "torch / ours", "logits max rel err", "ours first call (builds)")]
    phases = [("prefill", lambda: prefill_phase(s, figures, rows))]
    if not args.no_graph_prefill:
        phases.append(("prefill graph", lambda: graph_prefill_phase(s, figures, rows)))
    phases += [(f"decode b{b}", lambda b=b: decode_phase(s, b, figures, rows)) for b in args.decode_batch]
    phases += [(f"decode graph b{b}", lambda b=b: graph_decode_phase(s, b, figures, rows))
               for b in args.graph_decode_batch]
    with GpuSampler() as gpu, torch.inference_mode():
        for phase, run in phases:
            if time.perf_counter() > deadline:
                figures.setdefault("skipped_for_time", []).append(phase)
                continue
            try:
                run()
            except Exception as e:  # noqa: BLE001 - a failed phase is a figure, not the end of the run
                figures.setdefault("errors", []).append(f"{phase}: {type(e).__name__}: {e}")
                rows.append((phase, "ERROR", type(e).__name__, "", "", ""))
                print(f"error in {phase}: {type(e).__name__}: {e}", file=sys.stderr)
            if not dry:
                torch.cuda.empty_cache()
    figures.update({f"{PREFIX}_routed_calls": router.routed_calls, f"{PREFIX}_fallback_calls": dict(router.fallback_calls),
                    f"{PREFIX}_gemm_shapes": len(router.ops), f"{PREFIX}_build_s_total": sum(router.build_s.values()),
                    f"{PREFIX}_build_s_per_shape": router.shapes_built(), f"{PREFIX}_wall_s": time.perf_counter() - t0})
    if figures[f"{PREFIX}_build_s_per_shape"]:
        figures[f"{PREFIX}_build_s_median_per_shape"] = statistics.median(figures[f"{PREFIX}_build_s_per_shape"].values())
    import transformers

    notes = {"ratio": "torch median time / our median time (above 1: ours faster)",
             "A": ("the model with every nn.Linear routed through the router to F.linear (a control: the "
                   "router's own cost)" if control else "the model with every nn.Linear routed to our GEMM "
                   f"(make_gemm(m, n, k, transpose_b=True{', tune=' + repr(args.tune) if args.tune else ''}) "
                   "as a torch op per shape)"),
             "B": "the same weights on torch's nn.Linear (cuBLAS)",
             "order": "A B B A ... (common.interleaved_rounds), CUDA events around each forward / generation",
             "model": config_values, "dtype": "bfloat16", "attention": torch_model.config._attn_implementation,
             "prefill": f"{args.prefill_batch} x {args.prefill_len} tokens, one forward, every position's logits",
             "decode": f"prompt {args.prompt_len} tokens then {args.new_tokens} greedy tokens (manual loop, KV "
                       f"cache), timed per generation", "rounds": args.rounds,
             "max_rel_error": "max |ours - torch| / max |torch| over the logits",
             "kernel_cache": "warm (kept)" if args.warm_cache else "empty at start: first calls build every shape",
             "torch": torch.__version__, "transformers": transformers.__version__,
             "dry_run": "CPU, tiny Llama, F.linear standing in for our GEMM, wall clock" if dry else None}
    out_dir = None if (os.environ.get("OUT") or not dry) else tempfile.mkdtemp(prefix="hf_model_dry_run_")
    path = write_record("hf_model", figures, notes=notes, sampler=gpu, out_dir=out_dir)
    print(f"linears routed: {figures[f'{PREFIX}_linears_routed']} of {figures[f'{PREFIX}_linears_total']}; "
          f"GEMM shapes built: {len(router.ops)} in {figures[f'{PREFIX}_build_s_total']:.1f} s; "
          f"calls not routed: {dict(router.fallback_calls) or 'none'}")
    print(f"clock/power: {gpu.summary()}")
    print(f"record: {path}")
    print(table(rows))


if __name__ == "__main__":
    main()
