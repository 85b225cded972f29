"""benchmarks/common.py on the CPU: append-only records, clock/power sampling, A B B A interleaving."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402


def _fake_reader():
    readings = iter([(1980.0, 400.0), (1755.0, 650.0), (1830.0, 690.0)] + [(1830.0, 690.0)] * 10_000)
    return lambda: next(readings)


def test_write_record_never_overwrites(tmp_path, monkeypatch):
    monkeypatch.setenv("MGPU_LAB_COMMIT", "0123456789abcdef")
    with common.GpuSampler(interval_s=3600, reader=_fake_reader()) as gpu:
        gpu.sample()  # enter, this, exit: three readings
    first = common.write_record("bench_x", {"x_vs_y": 1.0}, sampler=gpu, out_dir=tmp_path)
    second = common.write_record("bench_x", {"x_vs_y": 2.0}, sampler=gpu, out_dir=tmp_path)
    assert first != second and first.exists() and second.exists()
    assert json.loads(first.read_text())["figures"] == {"x_vs_y": 1.0}
    assert json.loads(second.read_text())["figures"] == {"x_vs_y": 2.0}
    assert "01234567" in first.name and first.name.startswith("bench_x_20")
    record = json.loads(first.read_text())
    for key in ("device", "driver", "commit", "time_utc", "gpu"):
        assert key in record
    assert record["gpu"]["sm_clock_mhz"] == {"median": 1830.0, "min": 1755.0, "max": 1980.0}
    assert record["gpu"]["power_w"]["max"] == 690.0 and record["gpu"]["source"] == "given"
    names = [r["_file"] for r in common.load_records("bench_x", tmp_path)]
    assert sorted(names) == sorted([first.name, second.name])


def test_sampler_survives_a_failing_reader():
    def broken():
        raise RuntimeError("NVML went away")

    with common.GpuSampler(interval_s=0.01, reader=broken) as gpu:
        pass
    assert gpu.summary() == {"source": "given", "samples": 0, "sm_clock_mhz": None, "power_w": None}


def test_interleaved_rounds_alternates_a_b_b_a():
    calls = []

    def timer(fn):
        calls.append(fn(0))
        return SimpleNamespace(runs_ms=(1.0,) if calls[-1] == "A" else (2.0,))

    result = common.interleaved_rounds(lambda i: "A", lambda i: "B", rounds=4, timer=timer)
    assert "".join(calls) == "ABBAABBA" == "".join(result.order)
    assert result.a_ms == 1.0 and result.b_ms == 2.0 and result.ratio == 0.5
    with pytest.raises(ValueError, match="rounds"):
        common.interleaved_rounds(lambda i: 0, lambda i: 0, rounds=0, timer=timer)


def test_interleaved_runs_reverses_the_order_of_any_number_of_sides():
    calls = []

    def timer(fn):
        calls.append(fn(0))
        return SimpleNamespace(runs_ms=[float(len(calls))])

    runs, order = common.interleaved_runs({"A": lambda i: "A", "B": lambda i: "B", "C": lambda i: "C"}, rounds=3,
                                          timer=timer)
    assert "".join(calls) == "ABCCBAABC" == "".join(order)
    assert runs == {"A": [1.0, 6.0, 7.0], "B": [2.0, 5.0, 8.0], "C": [3.0, 4.0, 9.0]}


def test_make_table_shows_median_and_range_over_all_runs_at_the_commit(tmp_path, monkeypatch):
    import make_table

    def record(when, commit, ratio):
        name = f"foundation_{when}_{commit[:8]}.json"
        (tmp_path / name).write_text(json.dumps({
            "benchmark": "foundation", "date": when[:10], "time_utc": when, "commit": commit,
            "gpu": {"sm_clock_mhz": {"median": 1700.0}, "power_w": {"median": 500.0}},
            "figures": {"tiled_copy_8192_vs_copyto": ratio, "tiled_copy_8192_GBps": 4000 * ratio,
                        "copyto_8192_GBps": 4000.0}}))

    record("2026-12-01T010000Z", "a" * 40, 0.90)
    record("2026-12-01T020000Z", "b" * 40, 0.97)
    record("2026-12-01T030000Z", "b" * 40, 0.99)
    record("2026-12-01T040000Z", "b" * 40, 0.95)
    text = make_table.render(tmp_path)
    [row] = [line for line in text.splitlines() if "tiled smem copy" in line]
    assert "**0.970 (0.950-0.990, 3 runs)**" in row and "0.900" not in row
    assert "1700 MHz, 500 W" in row and "bbbbbbbb" in row and "aaaaaaaa" not in row
    [row] = [line for line in make_table.render(tmp_path, last=4).splitlines() if "tiled smem copy" in line]
    assert "(0.900-0.990, 4 runs)" in row and "aaaaaaaa, bbbbbbbb" in row


def test_shape_lists_read_both_layouts_and_name_the_option_of_a_bad_spec():
    assert common.parse_shapes("517x1712x12104, 322x1560x2144:nn,1x2x3:nt") == [
        (517, 1712, 12104, True), (322, 1560, 2144, False), (1, 2, 3, True)]
    with pytest.raises(SystemExit, match=r"--probe: '1x2' is not MxNxK\[:nt\|:nn\]"):
        common.parse_shapes("1x2", option="--probe")
    with pytest.raises(SystemExit, match=r"--shapes: '1x2x3:tt': the layout after ':' must be nt or nn"):
        common.parse_shapes("1x2x3:tt")


def test_make_table_keeps_each_gpu_kind_apart_and_leaves_probe_runs_out(tmp_path):
    import make_table

    def record(when, ratio, **fields):
        name = f"foundation_{when}_cccccccc.json"
        (tmp_path / name).write_text(json.dumps({
            "benchmark": "foundation", "date": when[:10], "time_utc": when, "commit": "c" * 40, **fields,
            "figures": {"tiled_copy_8192_vs_copyto": ratio}}))

    record("2026-12-01T010000Z", 0.90)  # names no device: the H200's table
    record("2026-12-01T020000Z", 0.92, device="NVIDIA H200")
    record("2026-12-01T030000Z", 0.50, device="NVIDIA H100 80GB HBM3", gemm_calibration="h100_measured.json")
    # names none: picked with the built-in constants, which main no longer gives the H100
    record("2026-12-01T030500Z", 0.30, device="NVIDIA H100 80GB HBM3")
    record("2026-12-01T040000Z", 0.10, device="NVIDIA H200", gemm_constants="other.json")  # a probe
    # picked with a calibration main no longer gives the H100 (retired): a probe too
    record("2026-12-01T050000Z", 0.20, device="NVIDIA H100 80GB HBM3", gemm_calibration="constants_h100.json")
    record("2026-12-01T060000Z", 0.40, device="NVIDIA H200", gemm_calibration="built-in (H200)")  # main's
    [h200] = [line for line in make_table.render(tmp_path).splitlines() if "tiled smem copy" in line]
    assert "(0.400-0.920, 3 runs)" in h200
    [h100] = [line for line in make_table.render(tmp_path, device="H100").splitlines() if "tiled smem copy" in line]
    assert "**0.500 (1 run)**" in h100


def test_make_table_derives_the_attention_sweep_minimum_from_full_runs_only(tmp_path):
    import make_table

    def record(when, shapes, low):
        figures = {f"attention_fwd_bf16_d{i}_s4096_vs_cudnn": 1.0 + i / 100 for i in range(shapes)}
        figures["attention_fwd_bf16_d0_s4096_vs_cudnn"] = low
        figures["attention_fwd_bf16_d1_s4096_cudnn_tflops"] = 0.5  # not a ratio: ignored
        (tmp_path / f"attention_{when}_cccccccc.json").write_text(json.dumps({
            "benchmark": "attention", "date": when[:10], "time_utc": when, "commit": "c" * 40, "figures": figures}))

    record("2026-12-01T010000Z", 25, 0.93)
    record("2026-12-01T020000Z", 25, 0.95)
    record("2026-12-01T030000Z", 4, 0.70)  # a --quick run: no sweep minimum
    [row] = [line for line in make_table.render(tmp_path).splitlines() if "lowest shape" in line]
    assert "**0.940 (0.930-0.950, 2 runs)**" in row and "0.700" not in row


def test_make_table_reads_each_profiler_row_from_the_runs_that_measured_it(tmp_path):
    """Newer attention runs do not push the GEMM rows out of the table, and a windowed attention
    run is reported apart from every-tile runs (old records, or profile_tiles='all')."""
    import make_table

    def record(when, kernel, ratio, **notes):
        (tmp_path / f"profiler_{when}_dddddddd.json").write_text(json.dumps({
            "benchmark": "profiler", "date": when[:10], "time_utc": when, "commit": "d" * 40,
            "notes": {"kernel": kernel, **notes}, "figures": {f"{kernel}_profiled_vs_plain": ratio}}))

    record("2026-12-01T010000Z", "gemm_4096_nt", 1.019)
    record("2026-12-01T020000Z", "attention_d128_s8192_b2", 1.26)  # before profile_tiles: every tile
    for hour, ratio in ((3, 1.17), (4, 1.15), (5, 1.16), (6, 1.18)):
        record(f"2026-12-01T0{hour}0000Z", "attention_d128_s8192_b2", ratio, profile_tiles=None)
    record("2026-12-01T070000Z", "attention_d128_s8192_b2", 1.22, profile_tiles="all")
    lines = make_table.render(tmp_path).splitlines()
    [gemm] = [line for line in lines if "gemm_4096_nt" in line]
    [window] = [line for line in lines if "a window of K/V tiles" in line]
    [every] = [line for line in lines if "every K/V tile" in line]
    assert "**1.019 (1 run)**" in gemm
    assert "**1.160 (1.150-1.180, 3 runs)**" in window  # the newest three windowed runs
    assert "**1.240 (1.220-1.260, 2 runs)**" in every


def test_make_table_reports_build_times_per_host(tmp_path):
    import make_table

    def record(when, device, slowest, **more):
        (tmp_path / f"build_time_{when}_eeeeeeee.json").write_text(json.dumps({
            "benchmark": "build_time", "date": when[:10], "time_utc": when, "commit": "e" * 40, "device": device,
            "figures": {"seed": 7, "build_time_seed7_max_s": slowest}, **more}))

    record("2026-12-01T010000Z", "unavailable", 1.2)
    record("2026-12-01T020000Z", "NVIDIA H200", 2.0)
    record("2026-12-01T030000Z", "NVIDIA H100 80GB HBM3", 0.9, gemm_calibration="h100_measured.json")
    lines = make_table.render(tmp_path).splitlines()
    [h200] = [line for line in lines if "slowest (the H200 machine's host)" in line]
    [h100] = [line for line in make_table.render(tmp_path, device="H100").splitlines()  # the H100's own table
              if "slowest (the H100 machine's host)" in line]
    [cpu] = [line for line in lines if "slowest (the 2-core CPU machine)" in line]
    assert "**2.000 (1 run)**" in h200 and "**0.900 (1 run)**" in h100 and "**1.200 (1 run)**" in cpu
    assert "< 1" in h200 and "goal: H200 host" in h100  # the target is the H200 machine's host


def test_make_table_reads_drawn_fp8_runs_of_any_seed_per_scaling_mode(tmp_path):
    """The FP8 drawn-shape rows take the newest four runs of each mode, whatever their seed."""
    import make_table

    def record(when, mode, seed, geomean):
        (tmp_path / f"gemm_fp8_random_{when}_ffffffff.json").write_text(json.dumps({
            "benchmark": "gemm_fp8_random", "date": when[:10], "time_utc": when, "commit": "f" * 40,
            "notes": {"mode": mode, "seed": seed},
            "figures": {f"gemm_fp8_{mode}_random_seed{seed}_geomean_vs_scaled_mm": geomean}}))

    for hour, (mode, seed, geomean) in enumerate((("tensor", 6, 0.50), ("tensor", 7, 0.90), ("block", 7, 0.70),
                                                  ("tensor", 12, 0.94), ("block", 12, 0.84), ("tensor", 13, 0.97),
                                                  ("tensor", 14, 0.96))):
        record(f"2026-12-04T0{hour}0000Z", mode, seed, geomean)
    lines = make_table.render(tmp_path).splitlines()
    [tensor] = [line for line in lines if "per-tensor scales, 32 shapes drawn" in line]
    [block] = [line for line in lines if "block scales, 32 shapes drawn" in line]
    assert "**0.950 (0.900-0.970, 4 runs)**" in tensor  # seeds 7 and 12-14, not seed 6's older run
    assert "**0.770 (0.700-0.840, 2 runs)**" in block


def test_make_table_rewrites_only_between_the_markers(tmp_path):
    import make_table

    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{make_table.BEGIN}\nold table\n{make_table.END}\nnotes\n")
    make_table.write_readme("| new |", readme)
    assert readme.read_text() == f"intro\n{make_table.BEGIN}\n| new |\n{make_table.END}\nnotes\n"


def test_first_call_children_are_valid_python():
    import ast

    import bench_first_call

    for code in (bench_first_call.OURS, bench_first_call.JAX):
        ast.parse(code.format(size=256))


def test_make_table_renders_the_newest_mutation_record(tmp_path):
    import make_table

    module = {"killed": 8, "mutants_run": 10, "mutants_total": 300, "sampled": True, "score": 0.8,
              "score_cpu_reachable": 0.889, "survivors_gpu_only": 1, "survivors_equivalent": 0,
              "survivors": [{"reason": "GPU-only: x"}, {"reason": "unexplained"}]}
    (tmp_path / "mutation_2026-12-01T010000Z_abcdef12.json").write_text(json.dumps({
        "benchmark": "mutation", "time_utc": "2026-12-01T01:00:00+00:00", "commit": "abcdef12" * 5,
        "figures": {}, "notes": {"tool": "mutmut 3.8.1", "commit_measured": "abcdef12" * 5,
                                 "modules": {"profiler.decode": module}}}))
    text = make_table.render_mutation(tmp_path)
    assert "| profiler.decode | 8 / 10 (sample of 300) | 0.80 | **0.89** | 1 | 0 | 1 |" in text
    assert "commit abcdef12" in text and "mutation_2026-12-01T010000Z_abcdef12.json" in text


@pytest.mark.parametrize("script", sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py")))
def test_every_benchmark_script_imports_without_a_gpu(script):
    """A helper renamed in one script must not leave another's import broken until a GPU run."""
    import importlib

    importlib.import_module(script)


def test_the_tuner_tries_split_k_where_tiles_leave_sms_idle_and_only_there():
    """Ragged M = 129 fills 96 of the 132 SMs with 64 x 128 tiles: it gets split candidates (3- and
    4-way included), a compute-bound square none."""
    from gemm_sweep import Problem
    from tune_gemm_configs import SPLIT_WAVES, space

    from mgpu_lab.kernels.gemm.configs import SMS

    ragged = space(Problem(129, 4096, 4104, True, "ragged decode"))["choice"]
    plain = [c for c in ragged if not c[6]]
    splits = {(c.tile_m, c.tile_n, c.split_k) for c in plain if c.split_k > 1}
    assert {c.reduce for c in plain if c.split_k > 1} == {"cluster", "workspace"}  # both ways of summing
    assert (128, 256, 4) in splits and (64, 256, 3) in splits
    for tm, tn, s in splits:
        assert -(-129 // tm) * -(-4096 // tn) * s <= SPLIT_WAVES * SMS and -(-4104 // 64) // s >= 8
    square = space(Problem(8192, 8192, 8192, False, "square"))["choice"]
    assert all(c.split_k == 1 for c in square)
    assert any(c.cluster_m == 2 for c in square)  # multicast pairs where the tiles take waves
    assert not any(c.swap_ab for c in square)


def test_the_tuner_tries_wider_raster_groups_where_tiles_take_many_waves_only():
    """8192^3 in 128x256 tiles is 15.5 waves: its persistent and stream-K candidates of 128x256 and 256x128 come with
    group_m 8 and 16; 2048^3 (128 tiles of 128x256) gets group_m 8 only. B (n, k) problems get
    128x192 tiles (1024x6144 in two even waves)."""
    from gemm_sweep import Problem
    from tune_gemm_configs import GROUPS, space

    square = space(Problem(8192, 8192, 8192, False, "square"))["choice"]
    wide = {(c.tile_m, c.tile_n, c.persistent, c.cluster_m) for c in square if c.group_m == 16}
    assert (128, 256, True, 1) in wide and (128, 256, "stream_k", 2) in wide and (256, 128, True, 2) in wide
    assert all((c.tile_m, c.tile_n, c.persistent, c.cluster_m) in wide for c in square
               if c.group_m == 8 and c.persistent and c.tile_m * c.tile_n >= 128 * 192)
    assert {c.group_m for c in square} == set(GROUPS)
    assert {c.group_m for c in space(Problem(2048, 2048, 2048, False, "square"))["choice"]} == {8}
    nt = space(Problem(1024, 6144, 4096, True, "qkv"))["choice"]
    assert any((c.tile_m, c.tile_n, c.persistent) == (128, 192, False) for c in nt)
    assert not any(c.tile_n == 192 for c in space(Problem(1024, 6144, 4096, False, "B (k, n)"))["choice"])


def test_the_tuner_tries_swap_ab_for_skinny_a_only():
    """C.T = B @ A.T where A has at most 256 rows and B is (n, k): A's rows rounded up to 8 and to 16
    as the tile width (129 -> 136, 144), split over K in a cluster only."""
    from gemm_sweep import Problem
    from tune_gemm_configs import space

    ragged = [c for c in space(Problem(129, 4096, 4104, True, "ragged decode"))["choice"] if c[6]]
    assert {c.tile_n for c in ragged} == {136, 144} and (128, 144, False, 3, "cluster", 1, True, 8) in ragged
    assert all(c.persistent is False and (c.split_k == 1 or c.reduce == "cluster") for c in ragged)
    decode = [c for c in space(Problem(16, 6144, 4096, True, "decode"))["choice"] if c.swap_ab]
    assert (64, 16, False, 1, "cluster", 1, True, 8) in decode
    assert not any(c[6] for c in space(Problem(16, 6144, 4096, False, "B (k, n)"))["choice"])
    assert not any(c[6] for c in space(Problem(512, 4096, 4096, True, "not skinny"))["choice"])


def test_every_bf16_sweep_problem_has_its_own_figure_keys():
    """Both layouts of a square must not write the same `gemm_bf16_<MxNxK>_*` figures."""
    from bench_gemm import bf16_tag
    from gemm_sweep import bf16_problems

    tags = [bf16_tag(p) for p in bf16_problems()]
    assert len(set(tags)) == len(tags)
    assert "gemm_bf16_4096x4096x4096" in tags and "gemm_bf16_4096x4096x4096_nt" in tags
