"""Smoke test of benchmarks/bench_hf_model.py: its --cpu-dry-run (a tiny Llama on the CPU, F.linear
standing in for our GEMM) runs every phase and writes a record naming both sides. No timing is
checked. Needs torch and transformers (skipped without them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_hf_model  # noqa: E402


def test_cpu_dry_run_writes_every_phase_with_both_sides(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OUT", str(tmp_path))
    bench_hf_model.main(["--cpu-dry-run", "--prefill-batch", "2", "--prefill-len", "12", "--decode-batch", "1", "2",
                         "--new-tokens", "3", "--rounds", "1", "--prefill-iters", "1", "--decode-iters", "1",
                         "--graph-decode-batch", "2"])
    (path,) = tmp_path.glob("hf_model_*.json")
    figures = json.loads(path.read_text())["figures"]
    assert "errors" not in figures
    assert figures["hf_llama_linears_routed"] == figures["hf_llama_linears_total"] == 2 * 7 + 1
    assert figures["hf_llama_fallback_calls"] == {}
    for phase in ("prefill_2x12", "decode_b1", "decode_b2"):
        assert figures[f"hf_llama_{phase}_vs_torch"] > 0 and f"hf_llama_{phase}_ours_ms" in figures
        assert figures[f"hf_llama_{phase}_shapes_built"] >= 1
    # F.linear in our place: the same logits and tokens as torch's
    assert figures["hf_llama_prefill_2x12_max_rel_error"] == 0.0
    assert figures["hf_llama_decode_b2_tokens_matching_torch"] == 1.0
    # prefill: 5 shapes (q/o, k/v, gate/up, down, lm_head); decode b1: the prompt's 4 and the token's 5
    assert figures["hf_llama_prefill_2x12_shapes_built"] == 5 and figures["hf_llama_decode_b1_shapes_built"] == 9
    # the prefill as one graph replay per side (eager on a CPU): the same logits as torch's, timed
    assert figures["hf_llama_prefill_graph_2x12_max_rel_error"] == 0.0
    assert figures["hf_llama_prefill_graph_2x12_vs_torch"] > 0 and "hf_llama_prefill_graph_2x12_ours_ms" in figures
    # the static-cache decode (its steps eager on a CPU): the same tokens as torch's and as the eager loop
    assert figures["hf_llama_decode_graph_b2_vs_torch"] > 0
    assert figures["hf_llama_decode_graph_b2_tokens_matching_torch"] == 1.0
    assert figures["hf_llama_decode_graph_b2_torch_tokens_matching_eager"] == 1.0
    assert "torch / ours" in capsys.readouterr().out


def test_tune_is_for_our_gemm_not_the_router_control():
    with pytest.raises(SystemExit, match="--tune applies to our GEMM"):
        bench_hf_model.main(["--cpu-dry-run", "--gemm", "torch", "--tune", "auto"])


def test_the_graph_prefill_can_be_left_out(tmp_path, monkeypatch):
    monkeypatch.setenv("OUT", str(tmp_path))
    bench_hf_model.main(["--cpu-dry-run", "--prefill-batch", "1", "--prefill-len", "8", "--decode-batch",
                         "--graph-decode-batch", "--rounds", "1", "--prefill-iters", "1", "--no-graph-prefill"])
    (path,) = tmp_path.glob("hf_model_*.json")
    figures = json.loads(path.read_text())["figures"]
    assert "hf_llama_prefill_1x8_vs_torch" in figures
    assert not any("prefill_graph" in key for key in figures)
