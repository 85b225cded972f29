"""A stand-in for `mgpu_lab.runtime.isolated_worker serve FD DEVICE` without CUDA, for testing
the real process plumbing (socket handed over, pickled messages, kills, exit codes) on a CPU.
The launch's digest says what to do: "ok", "fault" (reply Fault, exit 3), "hang", "crash"."""

from __future__ import annotations

import os
import sys
import time
from multiprocessing.connection import Connection

from mgpu_lab.runtime.worker_protocol import Done, Fault, Ready, Shutdown


def main(argv: list[str]) -> int:
    conn = Connection(int(argv[1]))
    conn.send(Ready(os.getpid(), int(argv[2])))
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return 0
        if isinstance(request, Shutdown):
            return 0
        if request.digest == "fault":
            conn.send(Fault("cudaErrorIllegalAddress", "an illegal memory access was encountered"))
            os._exit(3)
        if request.digest == "hang":
            time.sleep(3600)
        if request.digest == "crash":
            os._exit(139)
        conn.send(Done(0.0, [(h.offset, h.shape) for h in request.arrays]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
