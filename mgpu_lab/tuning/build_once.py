"""One build in a process of its own, for tunes on a Dask cluster: Dask's worker processes are
daemonic and may not start multiprocessing children, so `build_isolated` runs
`python -m mgpu_lab.tuning.build_once IN OUT` instead, and kills it at the time limit. A hang or a
build that kills its process costs that candidate one row; the worker lives on."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from .build_pool import BuildResult, build_timed


def build_isolated(build: Callable[..., tuple[str, Any]], make_kernel: Callable[..., Any], config: dict[str, Any],
                   timeout_s: float) -> BuildResult:
    """`build_timed` in a fresh interpreter, killed after `timeout_s`: (status, Kernel or reason,
    seconds). cloudpickle carries make_kernel (Dask's own serializer: functions defined by value
    travel too); the child sees this process's sys.path."""
    import cloudpickle

    t0 = time.perf_counter()
    try:
        payload = cloudpickle.dumps((build, make_kernel, config))
    except Exception as e:  # noqa: BLE001 - this candidate only
        return "failed-build", f"could not send the candidate to a build process: {type(e).__name__}: {e}", None
    with tempfile.TemporaryDirectory(prefix="mgpu-build-") as folder:
        source, result = os.path.join(folder, "in.pkl"), os.path.join(folder, "out.pkl")
        with open(source, "wb") as f:
            f.write(payload)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            done = subprocess.run([sys.executable, "-m", "mgpu_lab.tuning.build_once", source, result],
                                  env=env, capture_output=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return "failed-build", f"build timed out after {timeout_s:g} s (build_timeout_s)", timeout_s
        if done.returncode != 0 or not os.path.exists(result):
            last = (done.stderr.decode(errors="replace").strip().splitlines() or [""])[-1][:300]
            return ("failed-build", f"the build process died (exit code {done.returncode}) building this candidate"
                    + (f": {last}" if last else ""), time.perf_counter() - t0)
        with open(result, "rb") as f:
            return cloudpickle.loads(f.read())


def main(argv: list[str]) -> int:
    """Build the candidate pickled in argv[0] and write (status, payload, seconds) to argv[1]."""
    import cloudpickle

    source, result = argv
    with open(source, "rb") as f:
        build, make_kernel, config = cloudpickle.loads(f.read())
    status, payload, seconds = build_timed(build, make_kernel, config)
    try:
        data = cloudpickle.dumps((status, payload, seconds))
    except Exception as e:  # noqa: BLE001 - a built candidate that does not pickle: this one only
        data = cloudpickle.dumps(("failed-build", f"the built candidate could not be sent back: "
                                                  f"{type(e).__name__}: {e}", seconds))
    with open(result, "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
