"""The isolated GPU worker: a process that owns its own CUDA context and launches kernels on
its parent's arrays (opened by CUDA IPC), so a faulting kernel poisons only this process.

    python -m mgpu_lab.runtime.isolated_worker serve FD DEVICE   # the worker (worker_client.py starts it)
    python -m mgpu_lab.runtime.isolated_worker rerun FOLDER      # one launch of a saved repro (under
                                                                 # compute-sanitizer, by fault_report.py)

After a sticky error the worker sends `Fault` and exits at once: nothing may run on a poisoned
context. Loaded kernels are cached per digest (cubin + launch configuration).
"""

from __future__ import annotations

import os
import pickle
import re
import sys
import time
from pathlib import Path
from typing import Any

from .ipc import OpenedAllocations, as_cupy_array
from .worker_protocol import Done, Failed, Fault, KernelPayload, Launch, Ready, Shutdown

FAULT_EXIT_CODE = 3
REPRO_FILE = "repro.pkl"
_CUDA_ERROR = re.compile(r"\b(cudaError\w+|CUDA_ERROR_\w+)\b")


def cuda_error_name(error: BaseException) -> tuple[str, str]:
    """(CUDA error name, description) of an exception raised by CuPy or cuda-bindings calls."""
    text = str(error)
    m = _CUDA_ERROR.search(text)
    if m is None:
        return type(error).__name__, text
    rest = text[m.end():].lstrip(":) ").strip()
    return m.group(1), rest or text


def build_launcher(payload: KernelPayload) -> Any:
    """A PortableLauncher for a kernel payload (TMA descriptors encoded in this process)."""
    from .portable import PortableLauncher

    tma = None
    if payload.tma:
        from .tma_descriptor import TmaEncoder

        tma = TmaEncoder.from_dicts(list(payload.tma))
    return PortableLauncher(payload.spec, tma_encoder=tma)


def context_poisoned() -> bool:
    """Does this process's CUDA context refuse work? (A sticky error stays on every call.)"""
    import cupy

    try:
        cupy.cuda.runtime.deviceSynchronize()
        ptr = cupy.cuda.runtime.malloc(256)
        cupy.cuda.runtime.free(ptr)
        cupy.cuda.runtime.deviceSynchronize()
    except Exception:  # noqa: BLE001 - any failure here means the context is unusable
        return True
    return False


class WorkerState:
    """Loaded kernels and opened allocations of one worker; `handle` answers one request."""

    def __init__(self, device: int, opened: OpenedAllocations | None = None):
        self.device = device
        self.launchers: dict[str, Any] = {}
        self.opened = opened if opened is not None else OpenedAllocations()

    def handle(self, request: Launch) -> Done | Fault | Failed:
        import cupy

        try:
            launcher = self.launchers.get(request.digest)
            if launcher is None:
                if request.kernel is None:
                    return Failed("KeyError", f"the worker has no kernel {request.digest[:12]} and none was sent")
                launcher = self.launchers[request.digest] = build_launcher(request.kernel)
            arrays = [as_cupy_array(self.opened.pointer(h), h.shape, h.dtype, self.device) for h in request.arrays]
            t0 = time.perf_counter()
            launcher.launch_unchecked(*arrays)
            cupy.cuda.get_current_stream().synchronize()
            seconds = time.perf_counter() - t0
            profile = launcher.last_profile.get() if launcher.last_profile is not None else None
            return Done(seconds, profile)
        except Exception as e:  # noqa: BLE001 - every failure becomes a reply
            name, detail = cuda_error_name(e)
            if context_poisoned():
                return Fault(name, detail)
            return Failed(type(e).__name__, str(e))


def serve(conn: Any, device: int) -> None:
    """Answer requests on `conn` until Shutdown or the parent goes away."""
    import cupy

    cupy.cuda.Device(device).use()
    cupy.cuda.runtime.free(0)  # creates the context now, not on the first launch
    state = WorkerState(device)
    conn.send(Ready(os.getpid(), device))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            break  # the parent exited
        if isinstance(request, Shutdown):
            break
        reply = state.handle(request)
        conn.send(reply)
        if isinstance(reply, Fault):
            sys.stdout.flush()
            os._exit(FAULT_EXIT_CODE)  # never touch a poisoned context again, not even to clean up
    state.opened.close_all()


def save_repro(folder: Path, payload: KernelPayload, host_arrays: list[Any], device: int) -> Path:
    """Write what `rerun` needs: the kernel and host copies of its arrays."""
    path = Path(folder) / REPRO_FILE
    with path.open("wb") as f:
        pickle.dump({"payload": payload, "arrays": host_arrays, "device": device}, f)
    return path


def rerun(folder: Path) -> int:
    """Launch a saved repro once on fresh copies of its arrays; 0 if it ran clean."""
    import cupy

    with (Path(folder) / REPRO_FILE).open("rb") as f:
        repro = pickle.load(f)  # noqa: S301 - written by this package's parent process just now
    cupy.cuda.Device(repro["device"]).use()
    arrays = [cupy.asarray(a) for a in repro["arrays"]]
    launcher = build_launcher(repro["payload"])
    try:
        launcher.launch_unchecked(*arrays)
        cupy.cuda.get_current_stream().synchronize()
    except Exception as e:  # noqa: BLE001 - reported to the parent through the exit code and stderr
        name, detail = cuda_error_name(e)
        print(f"mgpu_lab rerun: {name}: {detail}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "serve":
        from multiprocessing.connection import Connection

        serve(Connection(int(argv[1])), int(argv[2]))
        return 0
    if len(argv) == 2 and argv[0] == "rerun":
        return rerun(Path(argv[1]))
    print("usage: python -m mgpu_lab.runtime.isolated_worker serve FD DEVICE | rerun FOLDER", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
