"""The timing worker: a fresh interpreter pinned to one GPU that times many candidates in one
CUDA context (`python -m mgpu_lab.tuning.timing_worker FD`; worker_pool.py starts it).

It is started with subprocess, not fork: a forked CUDA context is unusable, and a fresh
interpreter does not re-run the caller's notebook or script. Messages on the socket (pickled):
  parent -> worker: Setup once, then ("measure", key, payload) ... ("stop",)
  worker -> parent: ("ready", label) | ("setup-failed", reason), then per candidate
                    ("ok", Measurement) | (status, reason) | ("fault", reason) and exit.
After a sticky CUDA error the worker answers "fault" and exits at once, as the isolated
runtime worker does: nothing may run on a poisoned context.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FAULT_EXIT_CODE = 3


@dataclass
class Setup:
    """What a worker needs once: the timer, the inputs (host arrays, or a picklable callable
    returning them: a list of input tuples) and the reference output as a host array."""

    timer: Any
    input_sets: list[tuple] | None
    make_inputs: Callable[[], list[tuple]] | None
    reference: Any


def _inputs(setup: Setup) -> list[tuple]:
    if setup.make_inputs is None:
        return setup.input_sets
    made = setup.make_inputs()
    return [tuple(s) for s in made] if isinstance(made, list) else [tuple(made)]


def serve(conn: Any) -> None:
    """Answer measure requests on `conn` until "stop" or the parent goes away."""
    from ..runtime.isolated_worker import cuda_error_name
    from .timers import WrongResult

    setup: Setup = conn.recv()
    try:
        label = setup.timer.setup(_inputs(setup), setup.reference)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which gives up on this worker
        conn.send(("setup-failed", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", label))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return  # the parent exited
        if message[0] == "stop":
            return
        _, key, payload = message
        try:
            conn.send(("ok", setup.timer.measure(key, payload)))
        except WrongResult as e:
            conn.send(("wrong-result", str(e)))
        except Exception as e:  # noqa: BLE001 - every failure of a candidate becomes a reply
            if setup.timer.poisoned():
                name, detail = cuda_error_name(e)
                conn.send(("fault", f"{name}: {detail}"))
                sys.stdout.flush()
                os._exit(FAULT_EXIT_CODE)  # never touch a poisoned context again
            conn.send(("failed-launch", f"{type(e).__name__}: {e}"))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m mgpu_lab.tuning.timing_worker FD", file=sys.stderr)
        return 2
    from multiprocessing.connection import Connection

    serve(Connection(int(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
