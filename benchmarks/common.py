"""Helpers shared by the benchmark scripts: the run record, GPU clock/power sampling, interleaved timing.

Every benchmark script uses three things from here:

- `interleaved_rounds(a, b, rounds)` times ours (A) and the peer (B) in rounds A B, B A, A B, ...
  so clock or thermal drift hits both sides alike, and returns the medians and their ratio;
- `GpuSampler`, a context manager sampling the SM clock and board power in a background thread
  while the measurement runs (NVML through cuda-bindings, else pynvml, else `nvidia-smi`);
- `write_record(name, figures, sampler=...)`, which writes an append-only JSON record:
  `<name>_<YYYY-MM-DD>T<HHMMSS>Z_<commit8>.json` under benchmarks/results/ (or $OUT), never
  overwriting an existing file, naming device, driver, commit and the sampled clocks and power.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


# --------------------------------------------------------------------------- identity of the run

def device_name() -> str:
    """Name of the current CUDA device, or "unavailable" when there is none."""
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
    except Exception:  # noqa: BLE001 - no GPU, no CuPy: the record still gets written
        return "unavailable"
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else name


def driver_version() -> str:
    """CUDA driver version as "major.minor" (from cudaDriverGetVersion), or "unavailable"."""
    try:
        import cupy

        v = cupy.cuda.runtime.driverGetVersion()
    except Exception:  # noqa: BLE001
        return "unavailable"
    return f"{v // 1000}.{(v % 1000) // 10}"


def commit() -> str:
    """The commit being measured: $MGPU_LAB_COMMIT (set when the tree travels without .git) or git."""
    if os.environ.get("MGPU_LAB_COMMIT"):
        return os.environ["MGPU_LAB_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True, cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_identity() -> dict:
    """Device, driver and commit of this run, the TMA L2 promotion its kernels ask for (it
    changes times off the 128-byte line; fit_gemm_model.py reads it) and the GEMM model's
    switches on and calibration (its constants: built in, the device's file or the variable's):
    what every record names."""
    from mgpu_lab.kernels.gemm.model import calibration_of, switches_on  # plain Python, no MLIR
    from mgpu_lab.runtime.tma_descriptor import l2_promotion

    device = device_name()
    identity = {"device": device, "driver": driver_version(), "commit": commit(),
                "tma_l2_promotion": l2_promotion(), "gemm_switches": list(switches_on()),
                "gemm_calibration": calibration_of(device), "gemm_epilogue_slots_ran": epilogue_slots_ran()}
    return {**identity, **{key: os.environ[variable] for key, variable in PROBE_SETTINGS.items()
                           if os.environ.get(variable)}}


def epilogue_slots_ran() -> str:
    """The epilogue slot policy this run's persistent GEMMs stream C with (pieces.EPILOGUE_SLOTS,
    read without importing pieces: the variable, else the default), named in every record since
    the default changed (fit_gemm_model.main_kernels reads it)."""
    return os.environ.get(PROBE_SETTINGS["gemm_epilogue_slots"]) or "fill"


# Record key -> the variable that, set, runs the GEMM otherwise than main ships it (a probe):
# the model's switches changed, its constants replaced, swapped tiles' stores switched, the
# epilogue slots or the default ring's smem changed, unused smem added to every block, wide
# tiles' default ring capped, the store boxes' widths mixed.
PROBE_SETTINGS = {"gemm_offer": "MGPU_LAB_GEMM_OFFER", "gemm_constants": "MGPU_LAB_GEMM_CONSTANTS",
                  "gemm_swap_store": "MGPU_LAB_GEMM_SWAP_STORE", "gemm_epilogue_slots": "MGPU_LAB_GEMM_EPILOGUE_SLOTS",
                  "gemm_ring_smem": "MGPU_LAB_GEMM_RING_SMEM", "gemm_smem_pad": "MGPU_LAB_GEMM_SMEM_PAD",
                  "gemm_wide_stages": "MGPU_LAB_GEMM_WIDE_STAGES", "gemm_store_boxes": "MGPU_LAB_GEMM_STORE_BOXES"}


def recorded_on(record: dict, gpu: str) -> bool:
    """Whether a record ran on `gpu` ("H200", "H100"): it names that GPU, or, for the H200, it
    names none (CPU-only runs, and the H200's from before the field was written)."""
    named = str(record.get("device") or "")
    if "NVIDIA" not in named:
        return gpu == "H200"
    return gpu in named


# --------------------------------------------------------------------------- clocks and power

def _nvml_reader() -> Callable[[], tuple[float, float]] | None:
    """A reader of (SM clock MHz, power W) through NVML (cuda-bindings, else pynvml), or None."""
    try:
        import cuda.bindings.nvml as nvml

        nvml.init_v2()
        handle = _nvml_handle(nvml.device_get_handle_by_pci_bus_id_v2, nvml.device_get_handle_by_index_v2)
        sm = nvml.ClockType.SM
        return lambda: (float(nvml.device_get_clock_info(handle, sm)),
                        nvml.device_get_power_usage(handle) / 1e3)
    except Exception:  # noqa: BLE001 - try the next source
        pass
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = _nvml_handle(pynvml.nvmlDeviceGetHandleByPciBusId, pynvml.nvmlDeviceGetHandleByIndex)
        return lambda: (float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                        pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3)
    except Exception:  # noqa: BLE001
        return None


def _current_pci_bus_id() -> str | None:
    """PCI bus id of CuPy's current device: NVML numbers devices ignoring CUDA_VISIBLE_DEVICES."""
    try:
        import cupy

        return cupy.cuda.runtime.deviceGetPCIBusId(cupy.cuda.runtime.getDevice())
    except Exception:  # noqa: BLE001
        return None


def _nvml_handle(by_bus_id, by_index):
    bus_id = _current_pci_bus_id()
    return by_bus_id(bus_id) if bus_id else by_index(0)


def _smi_reader() -> Callable[[], tuple[float, float]] | None:
    """A reader of (SM clock MHz, power W) through `nvidia-smi --query-gpu`, or None."""
    bus_id = _current_pci_bus_id()
    cmd = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"]
    if bus_id:
        cmd.append(f"--id={bus_id}")

    def read() -> tuple[float, float]:
        line = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=5).stdout
        clock, power = line.strip().splitlines()[0].split(",")
        return float(clock), float(power)

    try:
        read()
    except Exception:  # noqa: BLE001 - no nvidia-smi, no GPU
        return None
    return read


def _spread(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


@dataclass
class GpuSampler:
    """Samples the SM clock (MHz) and board power (W) every `interval_s` while the `with` block runs.

        with GpuSampler() as gpu:
            ...time things...
        write_record("x", figures, sampler=gpu)

    `reader` is for tests: a callable returning (clock_mhz, power_w); by default NVML
    (cuda-bindings or pynvml), else nvidia-smi; with none available the summary says so."""

    interval_s: float = 0.2
    reader: Callable[[], tuple[float, float]] | None = None
    source: str = "none"
    clocks_mhz: list[float] = field(default_factory=list)
    power_w: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def __enter__(self) -> GpuSampler:
        if self.reader is not None:
            self.source = "given"
        else:
            self.reader = _nvml_reader()
            self.source = "nvml" if self.reader else "none"
            if self.reader is None:
                self.reader = _smi_reader()
                self.source = "nvidia-smi" if self.reader else "none"
        if self.reader is not None:
            self.sample()
            self._thread = threading.Thread(target=self._run, name="GpuSampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.reader is not None:
            self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        """Take one reading now (a failed reading is skipped: sampling never breaks a benchmark)."""
        try:
            clock, power = self.reader()
        except Exception:  # noqa: BLE001
            return
        self.clocks_mhz.append(clock)
        self.power_w.append(power)

    def summary(self) -> dict:
        """Median, min and max of the SM clock and power over the samples, with their source and count."""
        return {"source": self.source, "samples": len(self.clocks_mhz),
                "sm_clock_mhz": _spread(self.clocks_mhz), "power_w": _spread(self.power_w)}


def gpu_snapshot() -> dict:
    """One reading of SM clock and power now (for records written without a sampler)."""
    with GpuSampler(interval_s=3600.0) as gpu:
        pass
    return gpu.summary()


# --------------------------------------------------------------------------- interleaved timing

@dataclass(frozen=True)
class Interleaved:
    """Per-run milliseconds of A (ours) and B (the peer) timed in alternating rounds."""

    a_runs_ms: tuple[float, ...]
    b_runs_ms: tuple[float, ...]
    order: tuple[str, ...]  # "A"/"B" per timed block, as run

    @property
    def a_ms(self) -> float:
        return statistics.median(self.a_runs_ms)

    @property
    def b_ms(self) -> float:
        return statistics.median(self.b_runs_ms)

    @property
    def ratio(self) -> float:
        """median(A) / median(B): below 1 means A is faster."""
        return self.a_ms / self.b_ms


def interleaved_runs(fns: dict[str, Callable[[int], object]], rounds: int = 6, *, warmup: int = 5, iters: int = 20,
                     timer: Callable | None = None) -> tuple[dict[str, list[float]], list[str]]:
    """Time every `fns[name](i)` in `rounds` rounds, the order reversed every other round (A B C,
    C B A, A B C, ...), so clock and power drift hit all sides alike. Returns (per-run ms by name,
    the names in the order their blocks ran).

    Each block is `timer(fn)`, by default CUDA events via `time_cuda(fn, warmup=, iters=)`; pass
    a timer returning an object with `runs_ms` (e.g. `lambda fn: time_host_calls(lambda: fn(0))`)
    to time something else the same interleaved way."""
    if rounds < 1:
        raise ValueError(f"interleaved_rounds: rounds must be >= 1, got {rounds}")
    if timer is None:
        from mgpu_lab.runtime.timing import time_cuda

        def timer(fn):
            return time_cuda(fn, warmup=warmup, iters=iters)

    names = list(fns)
    runs: dict[str, list[float]] = {name: [] for name in names}
    order: list[str] = []
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            runs[name] += timer(fns[name]).runs_ms
            order.append(name)
    return runs, order


def interleaved_rounds(a: Callable[[int], object], b: Callable[[int], object], rounds: int = 6, *,
                       warmup: int = 5, iters: int = 20, timer: Callable | None = None) -> Interleaved:
    """Time `a(i)` and `b(i)` in `rounds` rounds ordered A B, B A, A B, ... (so A B B A A B ...);
    `interleaved_runs` with two sides."""
    runs, order = interleaved_runs({"A": a, "B": b}, rounds, warmup=warmup, iters=iters, timer=timer)
    return Interleaved(tuple(runs["A"]), tuple(runs["B"]), tuple(order))


# --------------------------------------------------------------------------- records

def _timestamp(now: datetime.datetime) -> str:
    return now.strftime("%Y-%m-%dT%H%M%SZ")


def record_path(out_dir: Path, name: str, now: datetime.datetime, commit_id: str) -> Path:
    """`<name>_<YYYY-MM-DD>T<HHMMSS>Z_<commit8>.json` in out_dir (date first so names sort by time)."""
    return out_dir / f"{name}_{_timestamp(now)}_{commit_id[:8]}.json"


def write_record(name: str, figures: dict, notes: dict | None = None, *,
                 sampler: GpuSampler | None = None, out_dir: str | os.PathLike | None = None) -> Path:
    """Write a new record file and return its path; an existing file is never overwritten.

    The record names benchmark, UTC date and time, device, driver, commit, the SM clock and
    power (the sampler's summary, else one reading now), the figures and free-form notes.
    Written to `out_dir`, else $OUT when set, else benchmarks/results/."""
    now = datetime.datetime.now(datetime.timezone.utc)
    from mgpu_lab.runtime.tma_descriptor import encode_path  # numpy and ctypes only at import

    identity = run_identity()
    identity["tma_encode_path"] = encode_path()  # as it stands when the record is written
    record = {"benchmark": name, "date": now.date().isoformat(), "time_utc": now.isoformat(timespec="seconds"),
              **identity, "gpu": sampler.summary() if sampler else gpu_snapshot(),
              "figures": figures, "notes": notes or {}}
    directory = Path(out_dir or os.environ.get("OUT") or RESULTS)
    directory.mkdir(parents=True, exist_ok=True)
    base = record_path(directory, name, now, identity["commit"])
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    for n in range(1, 1000):
        path = base if n == 1 else base.with_name(f"{base.stem}_{n}.json")
        try:
            with open(path, "x") as f:  # "x": fails rather than overwrite a record
                f.write(text)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"write_record: 999 records named {base.stem}_* already exist in {directory}")


def load_records(name: str, results: Path = RESULTS) -> list[dict]:
    """All records of benchmark `name` in `results`, oldest first (old `<name>_<date>.json` included)."""
    records = []
    for path in sorted(results.glob(f"{name}_[0-9][0-9][0-9][0-9]-*.json")):
        record = json.loads(path.read_text())
        if record.get("benchmark", name) != name:
            continue
        record["_file"] = path.name
        record.setdefault("time_utc", record.get("date", ""))
        records.append(record)
    records.sort(key=lambda r: r["time_utc"])
    return records


def table(rows: list[tuple]) -> str:
    """Plain-text table of rows (first row = header), columns padded to their widest cell."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths)) for r in rows)


def parse_shapes(shapes: str, option: str = "--shapes") -> list[tuple[int, int, int, bool]]:
    """`MxNxK[:nt|:nn],...` as (m, n, k, B as (n, k)): B (n, k) unless ":nn". SystemExit naming
    the option and the spec for anything else."""
    parsed = []
    for spec in shapes.split(","):
        size, _, layout = spec.strip().partition(":")
        if layout not in ("", "nt", "nn"):
            raise SystemExit(f"{option}: {spec!r}: the layout after ':' must be nt or nn")
        try:
            m, n, k = (int(x) for x in size.split("x"))
        except ValueError:
            raise SystemExit(f"{option}: {spec!r} is not MxNxK[:nt|:nn]") from None
        parsed.append((m, n, k, layout != "nn"))
    return parsed
