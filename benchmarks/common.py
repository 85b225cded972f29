"""Helpers shared by the benchmark scripts: the run record and where it is written."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
from pathlib import Path


def device_name() -> str:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else name


def commit() -> str:
    """The commit being measured: $MGPU_LAB_COMMIT (set when the tree travels without .git) or git."""
    if os.environ.get("MGPU_LAB_COMMIT"):
        return os.environ["MGPU_LAB_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_record(name: str, figures: dict, notes: dict | None = None) -> Path:
    """Write benchmarks/results/<name>_<date>.json (or under $OUT when set) and return its path."""
    today = datetime.date.today().isoformat()
    record = {"benchmark": name, "date": today, "device": device_name(), "commit": commit(),
              "figures": figures, "notes": notes or {}}
    out_dir = Path(os.environ.get("OUT") or Path(__file__).parent / "results")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}_{today}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path


def table(rows: list[tuple]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths)) for r in rows)
