"""`Trace`: the decoded on-device profile of one kernel launch, as numpy columns.

A trace can hold millions of region instances, so it keeps one numpy array per field (a
column) instead of one Python object per event; `events()` builds small `Event` objects
on demand for code that prefers them. Every time is in nanoseconds from the earliest block
start of the launch. `decode.decode_buffer` builds a Trace from the device buffer;
`Trace.save` / `Trace.load` keep it on disk losslessly (.npz with a JSON metadata entry).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mgpu_lab.profiler.bounded_npz import DEFAULT_MAX_BYTES, read_npz

if TYPE_CHECKING:  # imported lazily at run time: they import this module
    from mgpu_lab.profiler.summary import RegionSummary

# Bits of `Trace.flags`: why a region's end time is not the end event the device wrote.
FLAG_CLOSED_AT_BLOCK_END = 1  # never ended in the buffer: closed at the block's end time
FLAG_END_DROPPED = 2  # its end was among the events dropped past capacity (with bit 0)
FLAG_IMPLICITLY_CLOSED = 4  # closed when an enclosing region ended before it did

# Declared ranges of a trace's fields, checked on whatever comes from outside (a saved file, a
# device buffer) before anything is sized by it: a region id is an index into a kernel's region
# names (the builder refuses more than MAX_REGIONS), a recording unit is a warpgroup or warp of
# a block of at most 1024 threads.
MAX_REGIONS = 1 << 16
MAX_UNITS_PER_BLOCK = 32

# Bumped when the on-disk layout changes, so `load` can refuse what it cannot read.
_SAVE_FORMAT = "mgpu_lab.trace/1"
_EVENT_COLUMNS = ("sm", "block", "unit", "region", "start_ns", "end_ns", "depth", "flags")
_BLOCK_COLUMNS = ("block_ids", "block_sm", "block_start_ns", "block_end_ns", "dropped_per_unit")


@dataclass(frozen=True)
class Event:
    """One region instance on one recording unit (a row of a `Trace`)."""

    sm: int
    block: int  # linear block id: x + grid_x * (y + grid_y * z)
    unit: int  # warpgroup or warp index inside the block
    name: str
    start_ns: float
    end_ns: float
    depth: int  # 0 for an outermost region
    flags: int = 0  # FLAG_* bits; 0 for a region the device began and ended normally

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns

    @property
    def unbalanced(self) -> bool:
        """True when the end time was inferred rather than recorded."""
        return self.flags != 0


def region_label(region_names: tuple[str, ...], region: int) -> str:
    """The name of region id `region`, or a placeholder for an id the kernel never declared."""
    if 0 <= region < len(region_names):
        return region_names[region]
    return f"<region {region}>"


def check_finite_times(trace: Trace, what: str) -> None:
    """Refuse a trace with NaN or inf event times: Chrome JSON has no such numbers (json.dumps
    would write the invalid token NaN) and Perfetto's integer timestamps would get garbage."""
    bad = ~(np.isfinite(trace.start_ns) & np.isfinite(trace.end_ns))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what}: start_ns/end_ns: expected finite times, got {int(bad.sum())} of "
                         f"{trace.num_events} events with NaN or inf (the first: event {first}, "
                         f"{float(trace.start_ns[first])} to {float(trace.end_ns[first])})")


def unit_label(block: int, unit: int, unit_kind: str) -> str:
    """The display name of one recording unit, e.g. "block 3 / warpgroup 1" (both exports)."""
    return f"block {block} / {unit_kind} {unit}"


class Trace:
    """Region instances of one launch (columns), plus per-block timing and drop counts.

    Event columns (equal length, one entry per region instance, ordered by block row, unit,
    then begin order): `sm`, `block`, `unit`, `region` (index into `region_names`),
    `start_ns`, `end_ns` (float64), `depth` (0 = outermost), `flags` (FLAG_* bits).
    Per-block arrays (one entry per row of the device buffer): `block_ids`, `block_sm`,
    `block_start_ns`, `block_end_ns`; `dropped_per_unit` has shape (blocks, units_per_block).
    `anomalies` maps a kind of unbalanced-region problem to how often decoding met it.
    """

    def __init__(
        self,
        *,
        sm: np.ndarray,
        block: np.ndarray,
        unit: np.ndarray,
        region: np.ndarray,
        start_ns: np.ndarray,
        end_ns: np.ndarray,
        depth: np.ndarray,
        flags: np.ndarray | None = None,
        region_names: Iterable[str],
        unit_kind: str,
        units_per_block: int,
        block_ids: np.ndarray,
        block_sm: np.ndarray,
        block_start_ns: np.ndarray,
        block_end_ns: np.ndarray,
        dropped_per_unit: np.ndarray | None = None,
        anomalies: Mapping[str, int] | None = None,
        kernel_name: str = "",
        capacity: int = 0,
        ns_per_cycle: float = float("nan"),
        origin_globaltimer_ns: int = 0,
        buffer: str = "smem",
    ) -> None:
        self.sm = np.asarray(sm, dtype=np.int32)
        self.block = np.asarray(block, dtype=np.int64)
        self.unit = np.asarray(unit, dtype=np.int32)
        self.region = np.asarray(region, dtype=np.int32)
        self.start_ns = np.asarray(start_ns, dtype=np.float64)
        self.end_ns = np.asarray(end_ns, dtype=np.float64)
        self.depth = np.asarray(depth, dtype=np.int32)
        n = self.start_ns.shape[0]
        self.flags = np.zeros(n, np.uint8) if flags is None else np.asarray(flags, np.uint8)
        for column in _EVENT_COLUMNS:
            if getattr(self, column).shape != (n,):
                raise ValueError(f"Trace column {column!r} must have shape ({n},)")

        self.region_names = tuple(region_names)
        self.unit_kind = unit_kind
        self.units_per_block = int(units_per_block)
        self.kernel_name = kernel_name
        self.capacity = int(capacity)
        self.ns_per_cycle = float(ns_per_cycle)
        # %globaltimer of time 0, to line a trace up with host-side or other device clocks.
        self.origin_globaltimer_ns = int(origin_globaltimer_ns)
        # Where the device kept the events ("smem" or "global", ProfilerSpec.buffer): global
        # costs a little more per event, which a reader of the timings should know.
        if buffer not in _BUFFERS:
            raise ValueError(f"Trace: buffer: expected one of {', '.join(map(repr, _BUFFERS))}, got {buffer!r}")
        self.buffer = buffer

        self.block_ids = np.asarray(block_ids, dtype=np.int64)
        self.block_sm = np.asarray(block_sm, dtype=np.int32)
        self.block_start_ns = np.asarray(block_start_ns, dtype=np.float64)
        self.block_end_ns = np.asarray(block_end_ns, dtype=np.float64)
        num_blocks = self.block_ids.shape[0]
        unit_shape = (num_blocks, self.units_per_block)
        self.dropped_per_unit = (
            np.zeros(unit_shape, np.int64)
            if dropped_per_unit is None
            else np.asarray(dropped_per_unit, dtype=np.int64).reshape(unit_shape)
        )
        for column in ("block_sm", "block_start_ns", "block_end_ns"):
            if getattr(self, column).shape != (num_blocks,):
                raise ValueError(
                    f"Trace per-block array {column!r} must have shape ({num_blocks},)"
                )
        # A trace built by hand gets the same bounds as a loaded one: the viewers allocate per
        # region id and unit, so an id of 2**31-1 must fail here, not in a notebook's memory.
        _check_range("Trace", "units_per_block", self.units_per_block, 1, MAX_UNITS_PER_BLOCK)
        for name, high in (("region", MAX_REGIONS - 1), ("unit", self.units_per_block - 1)):
            column = getattr(self, name)
            if column.size and not (0 <= int(column.min()) and int(column.max()) <= high):
                bad = int(column.min()) if int(column.min()) < 0 else int(column.max())
                raise ValueError(f"Trace: {name}: expected values in [0, {high}], got {bad}")
        self.anomalies: dict[str, int] = {k: int(v) for k, v in (anomalies or {}).items()}

    # ---- sizes and times -------------------------------------------------------------

    @property
    def num_events(self) -> int:
        return int(self.start_ns.shape[0])

    def __len__(self) -> int:
        return self.num_events

    @property
    def num_blocks(self) -> int:
        return int(self.block_ids.shape[0])

    @property
    def num_units(self) -> int:
        """Recording units in the launch: blocks times units per block."""
        return self.num_blocks * self.units_per_block

    @property
    def dropped(self) -> int:
        """Events lost because a unit tried to record more than `capacity`."""
        return int(self.dropped_per_unit.sum())

    @property
    def duration_ns(self) -> float:
        """From the earliest block start (time 0) to the latest block or region end."""
        ends = [0.0]
        if self.num_blocks:
            ends.append(float(self.block_end_ns.max()))
        if self.num_events:
            ends.append(float(self.end_ns.max()))
        return max(ends)

    @property
    def duration_column_ns(self) -> np.ndarray:
        """end_ns - start_ns for every event."""
        return self.end_ns - self.start_ns

    def region_name(self, region: int) -> str:
        return region_label(self.region_names, int(region))

    # ---- views -----------------------------------------------------------------------

    def events(self) -> Iterator[Event]:
        """Every region instance as an `Event`, in column order."""
        # One .tolist() per column turns numpy scalars into Python ones in bulk (fast).
        names = self.region_names
        columns = zip(
            self.sm.tolist(),
            self.block.tolist(),
            self.unit.tolist(),
            self.region.tolist(),
            self.start_ns.tolist(),
            self.end_ns.tolist(),
            self.depth.tolist(),
            self.flags.tolist(),
            strict=True,
        )
        for sm, block, unit, region, start, end, depth, flags in columns:
            name = names[region] if 0 <= region < len(names) else self.region_name(region)
            yield Event(sm, block, unit, name, start, end, depth, flags)

    def filter(
        self,
        region: int | str | Iterable[int | str] | None = None,
        block: int | Iterable[int] | None = None,
        unit: int | Iterable[int] | None = None,
        sm: int | Iterable[int] | None = None,
    ) -> Trace:
        """The events matching every given criterion (a value or a collection of values).

        `region` takes names or ids; `block` takes linear block ids. Per-block arrays and
        drop counts are kept whole, so time 0 and the kernel duration do not move.
        """
        keep = np.ones(self.num_events, dtype=bool)
        if region is not None:
            ids = [self._region_id(r) for r in _as_list(region)]
            keep &= np.isin(self.region, np.asarray(ids, dtype=np.int64))
        for column, wanted in ((self.block, block), (self.unit, unit), (self.sm, sm)):
            if wanted is not None:
                keep &= np.isin(column, np.asarray(_as_list(wanted), dtype=np.int64))
        return self._with_events(keep)

    def _region_id(self, region: int | str) -> int:
        if isinstance(region, str):
            try:
                return self.region_names.index(region)
            except ValueError:
                known = ", ".join(self.region_names) or "none"
                raise KeyError(f"no region named {region!r} (known: {known})") from None
        return int(region)

    def _with_events(self, keep: np.ndarray) -> Trace:
        """A copy holding the events selected by `keep` and the same per-block data."""
        columns = {name: getattr(self, name)[keep] for name in _EVENT_COLUMNS}
        return Trace(**columns, **self._block_data(), **self._metadata_kwargs())

    def _block_data(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in _BLOCK_COLUMNS}

    def _metadata_kwargs(self) -> dict[str, Any]:
        return {
            "region_names": self.region_names,
            "unit_kind": self.unit_kind,
            "units_per_block": self.units_per_block,
            "kernel_name": self.kernel_name,
            "capacity": self.capacity,
            "ns_per_cycle": self.ns_per_cycle,
            "origin_globaltimer_ns": self.origin_globaltimer_ns,
            "anomalies": dict(self.anomalies),
            "buffer": self.buffer,
        }

    def summary(self) -> RegionSummary:
        """Per-region statistics; see `summary.summarize` for the definitions."""
        from mgpu_lab.profiler.summary import summarize

        return summarize(self)

    def to_dataframe(self) -> Any:
        """The events as a pandas DataFrame, one row per region instance."""
        try:
            import pandas as pd
        except ImportError as err:
            raise ImportError(
                "Trace.to_dataframe needs pandas, which is not installed: pip install pandas"
            ) from err
        declared = list(self.region_names)
        unknown = [r for r in np.unique(self.region).tolist() if not 0 <= r < len(declared)]
        categories = declared + [self.region_name(r) for r in unknown]
        codes = self.region.astype(np.int64)
        # Undeclared ids get codes after the declared names so the column stays index-coded.
        for offset, r in enumerate(unknown):
            codes[self.region == r] = len(declared) + offset
        if len(set(categories)) == len(categories):
            region_column = pd.Categorical.from_codes(codes, categories=categories)
        else:  # duplicate names cannot be categories; plain strings still work
            region_column = np.asarray(categories, dtype=object)[codes]
        return pd.DataFrame(
            {
                "sm": self.sm,
                "block": self.block,
                "unit": self.unit,
                "region": region_column,
                "region_id": self.region,
                "start_ns": self.start_ns,
                "end_ns": self.end_ns,
                "duration_ns": self.duration_column_ns,
                "depth": self.depth,
                "unbalanced": self.flags != 0,
            }
        )

    # ---- export and persistence ------------------------------------------------------

    def to_chrome_json(self) -> dict[str, Any]:
        """Chrome trace-event JSON (a dict ready for json.dump); see `chrome_export`."""
        from mgpu_lab.profiler.chrome_export import to_chrome_json

        return to_chrome_json(self)

    def save_chrome_json(self, path: str | Path) -> Path:
        from mgpu_lab.profiler.chrome_export import save_chrome_json

        return save_chrome_json(self, path)

    def save_perfetto(self, path: str | Path) -> Path:
        """Write a Perfetto protobuf trace (open it in ui.perfetto.dev)."""
        from mgpu_lab.profiler.perfetto_export import save_perfetto

        return save_perfetto(self, path)

    def save(self, path: str | Path) -> Path:
        """Write the whole trace losslessly: .npz of the columns plus a JSON `meta` entry."""
        out = Path(path)
        if out.suffix != ".npz":
            # np.savez appends .npz to other names; do it here so the returned path is real.
            out = out.with_name(out.name + ".npz")
        meta = {"format": _SAVE_FORMAT, **self._metadata_kwargs()}
        meta["region_names"] = list(self.region_names)
        arrays = {name: getattr(self, name) for name in _EVENT_COLUMNS + _BLOCK_COLUMNS}
        # The metadata is stored as a numpy unicode scalar so loading needs no pickle.
        np.savez_compressed(out, meta=np.asarray(json.dumps(meta)), **arrays)
        return out

    @classmethod
    def load(cls, path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Trace:
        """Read a trace written by `save`, trusting nothing in the file.

        Sizes are checked before anything is inflated (`max_bytes`: the most the arrays may
        take in memory), then every field against its declared range; a file that fails a
        check raises ValueError naming the field."""
        arrays = read_npz(path, ("meta",) + _EVENT_COLUMNS + _BLOCK_COLUMNS, max_bytes)
        meta = _saved_metadata(arrays.pop("meta"), str(path))
        check_columns(arrays, meta["units_per_block"], str(path))
        return cls(**arrays, **meta)

    def __repr__(self) -> str:
        name = f" {self.kernel_name!r}" if self.kernel_name else ""
        extra = f", dropped={self.dropped}" if self.dropped else ""
        return (
            f"<Trace{name}: {self.num_events} events, {self.num_blocks} blocks x "
            f"{self.units_per_block} {self.unit_kind}s, {self.duration_ns / 1e3:.3f} µs, "
            f"{self.buffer} buffer{extra}>"
        )


_METADATA_TYPES = {"region_names": list, "unit_kind": str, "units_per_block": int, "kernel_name": str,
                   "capacity": int, "ns_per_cycle": (int, float), "origin_globaltimer_ns": int, "anomalies": dict,
                   "buffer": str}
_BUFFERS = ("smem", "global")


def _saved_metadata(stored: np.ndarray, what: str) -> dict[str, Any]:
    """The `meta` entry of a saved trace as Trace keywords, each of the type and range it declares."""
    if stored.dtype.kind != "U" or stored.shape != ():
        raise ValueError(f"{what}: meta: expected a JSON string, got a {stored.dtype} array of shape {stored.shape}")
    try:
        meta = json.loads(str(stored))
    except (ValueError, RecursionError) as e:  # RecursionError: nesting deeper than any trace writes
        raise ValueError(f"{what}: meta: expected the JSON that Trace.save writes, got unreadable JSON "
                         f"({type(e).__name__})") from None
    if not isinstance(meta, dict) or meta.pop("format", None) != _SAVE_FORMAT:
        raise ValueError(f"{what} is not a trace saved by mgpu_lab ({_SAVE_FORMAT})")
    meta.setdefault("buffer", "smem")  # saved before the global buffer existed: all were smem
    if set(meta) != set(_METADATA_TYPES):
        raise ValueError(f"{what}: meta: expected the fields {', '.join(sorted(_METADATA_TYPES))}, got "
                         f"{', '.join(sorted(map(str, meta)))}")
    for name, kind in _METADATA_TYPES.items():
        if not isinstance(meta[name], kind) or isinstance(meta[name], bool):
            raise ValueError(f"{what}: meta.{name}: expected {_type_names(kind)}, got {type(meta[name]).__name__}")
    names = meta["region_names"]
    if len(names) > MAX_REGIONS or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{what}: meta.region_names: expected at most {MAX_REGIONS} strings, got {len(names)} "
                         f"entries of types {sorted({type(n).__name__ for n in names})}")
    if meta["buffer"] not in _BUFFERS:
        raise ValueError(f"{what}: meta.buffer: expected one of {', '.join(map(repr, _BUFFERS))}, "
                         f"got {meta['buffer']!r}")
    _check_range(what, "meta.units_per_block", meta["units_per_block"], 1, MAX_UNITS_PER_BLOCK)
    _check_range(what, "meta.capacity", meta["capacity"], 0, (1 << 31) - 1)
    _check_range(what, "meta.origin_globaltimer_ns", meta["origin_globaltimer_ns"], 0, (1 << 64) - 1)
    if not all(isinstance(k, str) and isinstance(v, int) for k, v in meta["anomalies"].items()):
        raise ValueError(f"{what}: meta.anomalies: expected a map of names to counts")
    return meta


def check_columns(arrays: Mapping[str, np.ndarray], units_per_block: int, what: str) -> None:
    """Shapes, kinds and ranges of a trace's columns from outside (ValueError naming the column)."""
    for name, array in arrays.items():
        kind = "f" if name.endswith("_ns") else "iu"
        if array.dtype.kind not in kind:
            raise ValueError(f"{what}: {name}: expected {'floats' if kind == 'f' else 'integers'}, got {array.dtype}")
    n = arrays["start_ns"].shape
    blocks = arrays["block_ids"].shape
    for name in _EVENT_COLUMNS + _BLOCK_COLUMNS[:-1]:
        expected = n if name in _EVENT_COLUMNS else blocks
        if arrays[name].shape != expected or len(expected) != 1:
            raise ValueError(f"{what}: {name}: expected shape {expected} like "
                             f"{'start_ns' if name in _EVENT_COLUMNS else 'block_ids'} (1-D), got {arrays[name].shape}")
    dropped = arrays["dropped_per_unit"]
    if dropped.size != blocks[0] * units_per_block:
        raise ValueError(f"{what}: dropped_per_unit: expected {blocks[0]} blocks x {units_per_block} units, got "
                         f"{dropped.size} entries")
    for name, low, high in (("region", 0, MAX_REGIONS - 1), ("unit", 0, units_per_block - 1),
                            ("depth", 0, (1 << 31) - 1), ("flags", 0, 255), ("dropped_per_unit", 0, (1 << 62))):
        column = arrays[name]
        if column.size:
            _check_range(what, name, int(column.min()), low, high, "values")
            _check_range(what, name, int(column.max()), low, high, "values")


def _check_range(what: str, field: str, value: int, low: int, high: int, noun: str = "an int") -> None:
    if not low <= value <= high:
        raise ValueError(f"{what}: {field}: expected {noun} in [{low}, {high}], got {value}")


def _type_names(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _as_list(value: Any) -> list[Any]:
    """A single value or a collection of values as a list (strings count as one value)."""
    if isinstance(value, (str, int, np.integer)):
        return [value]
    return list(value)
