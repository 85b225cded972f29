"""The `mgpu-lab` command line: demo, compile, export, trace, tune.

Exit codes: 0 success, 1 the work failed (a check, a missing tool), 2 bad usage or input
(including a kernel that fails to build or compile): one line on stderr, no traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from .atomic_files import atomic_path


PRIVATE_MODULE_PREFIX = "_mgpu_lab_user_"


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit code 2."""


def _module_name_for(path: Path) -> str:
    """The name to import a user file under: its stem, unless that would shadow another module
    (a user file named json.py must not replace the json every library imports)."""
    stem = path.stem
    taken = stem in sys.modules or stem in sys.stdlib_module_names or not stem.isidentifier()
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    return f"{PRIVATE_MODULE_PREFIX}{digest}" if taken else stem


def _user_location(error: BaseException, file: Path) -> str:
    """'FILE.py, line N' of the innermost frame of the user's file in the error's traceback."""
    if isinstance(error, SyntaxError):
        return f"{file}, line {error.lineno}"
    where = ""
    tb = error.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == file.resolve():
            where = f"{file}, line {tb.tb_lineno}"
        tb = tb.tb_next
    return where or str(file)


def _load_attribute(file: str, name: str, what: str) -> Any:
    """Import FILE.py and return its attribute NAME.

    The file's folder goes at the end of sys.path (its sibling modules import; the standard
    library and installed packages still win over same-named files there)."""
    path = Path(file)
    if not path.is_file():
        raise CliError(f"{what}: file {file!r} does not exist")
    module_name = _module_name_for(path)
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"{what}: {file!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.append(folder)
    # Importable by name afterwards too, so its functions pickle into tuning worker processes.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[module_name]
        raise CliError(f"{what}: importing {file} failed at {_user_location(e, path)}: "
                       f"{type(e).__name__}: {_first_line(e)}") from None
    obj = getattr(module, name, None)
    if obj is None:
        raise CliError(f"{what}: {file} has no {name!r}")
    return obj


def _first_line(error: BaseException) -> str:
    text = (error.msg if isinstance(error, SyntaxError) else str(error)).strip()
    return text.splitlines()[0] if text else ""


def load_kernel(target: str) -> Any:
    """`FILE.py:NAME` -> the Kernel it names (a Kernel object, or a function returning one)."""
    file, sep, name = target.rpartition(":")
    if not sep or not file or not name:
        raise CliError(f"KERNEL: expected FILE.py:NAME, got {target!r}")
    obj = _load_attribute(file, name, "KERNEL")
    if callable(obj) and not hasattr(obj, "compiled"):
        obj = _call_user(obj, f"KERNEL: {file}:{name}()", Path(file))
    if not hasattr(obj, "compiled"):
        raise CliError(f"KERNEL: {file}:{name} is neither a Kernel nor a function returning one "
                       f"(got {type(obj).__name__})")
    return obj


def _call_user(fn: Any, what: str, file: Path) -> Any:
    """Call a user function; its errors become one-line CliErrors (mgpu_lab's own errors pass)."""
    from .errors import MgpuLabError

    try:
        return fn()
    except MgpuLabError:
        raise
    except Exception as e:
        raise CliError(f"{what} failed at {_user_location(e, file)}: {type(e).__name__}: {_first_line(e)}") from None


def _demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo()


def _compile(args: argparse.Namespace) -> int:
    kernel = load_kernel(args.kernel)
    ck = kernel.compiled
    show_all = not (args.ptx or args.sass or args.ir or args.resources)
    if args.resources or show_all:
        r = ck.resources
        print(f"{ck.name} {ck.target}: {r.registers} registers, {r.static_smem_bytes} B static + "
              f"{r.dynamic_smem_bytes} B dynamic smem, spills {r.spill_stores_bytes}/{r.spill_loads_bytes} B, "
              f"stack {r.stack_frame_bytes} B")
    if args.ptx:
        print(ck.ptx)
    if args.sass:
        print(ck.sass)
    if args.ir:
        print(ck.mlir)
    if args.out:
        ck.save(args.out)
        print(f"wrote {args.out}")
    return 0


def _export(args: argparse.Namespace) -> int:
    from .runtime.export import export

    kernel = load_kernel(args.kernel)
    print(f"wrote {export(kernel, args.output, overwrite=args.overwrite)}")
    return 0


def _load_trace(file: str) -> Any:
    from .profiler.trace import Trace

    from .profiler.bounded_npz import zip_magic_problem

    if not Path(file).is_file():
        raise CliError(f"FILE: trace file {file!r} does not exist")
    problem = zip_magic_problem(file)  # before numpy reads it: a Perfetto, JSON or text file is no .npz
    if problem:
        raise CliError(f"FILE: {file!r} is not a trace saved by Trace.save: {problem} (Perfetto and Chrome "
                       f"JSON exports cannot be read back: pass the .npz)")
    try:
        return Trace.load(file)
    except Exception as e:  # noqa: BLE001 - any parse failure is a bad input file
        raise CliError(f"FILE: {file!r} is not a trace saved by Trace.save ({type(e).__name__}: "
                       f"{_first_line(e)})") from None


def _trace_summary(args: argparse.Namespace) -> int:
    trace = _load_trace(args.file)
    print(f"{trace.kernel_name or 'kernel'}: {trace.num_events} events, {trace.duration_ns / 1e3:.1f} µs")
    print(trace.summary())
    return 0


def _trace_convert(args: argparse.Namespace) -> int:
    trace = _load_trace(args.file)
    fmt = args.to or ("chrome" if str(args.output).endswith(".json") else "perfetto")
    if not Path(args.output).parent.is_dir():
        raise CliError(f"--output: the folder of {args.output!r} does not exist")
    with atomic_path(args.output) as tmp:  # a failed conversion leaves no partial output
        trace.save_chrome_json(tmp) if fmt == "chrome" else trace.save_perfetto(tmp)
    print(f"wrote {args.output} ({fmt})")
    return 0


def _tune(args: argparse.Namespace) -> int:
    from .tuning import tune

    file, sep, name = args.setup.rpartition(":")
    if not sep:
        raise CliError(f"SETUP: expected FILE.py:NAME, got {args.setup!r}")
    setup = _load_attribute(file, name, "SETUP")
    problem = _call_user(setup, f"SETUP: {file}:{name}()", Path(file)) if callable(setup) else setup
    if not isinstance(problem, dict) or not {"make_kernel", "space", "args"} <= set(problem):
        raise CliError(f"SETUP: {args.setup} must return a dict with make_kernel, space, args (and optionally "
                       f"reference), got {type(problem).__name__}")
    make_kernel = problem["make_kernel"]
    if args.scheduler:
        result = _tune_on_cluster(args.scheduler, problem, make_kernel, use_cache=not args.no_cache)
    elif getattr(getattr(make_kernel, "func", make_kernel), "__module__", "").startswith(PRIVATE_MODULE_PREFIX):
        # A file imported under a private name cannot be re-imported by worker processes.
        import concurrent.futures

        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            result = tune(**problem, use_cache=not args.no_cache, executor=pool)
    else:
        result = tune(**problem, use_cache=not args.no_cache)
    print(result)
    if args.export and result.best_kernel is not None:
        from .runtime.export import export

        print(f"wrote {export(result.best_kernel, args.export, overwrite=args.overwrite)}")
    return 0 if result.best is not None else 1


def _tune_on_cluster(address: str, problem: dict, make_kernel: Any, *, use_cache: bool) -> Any:
    """`tune --scheduler ADDRESS`: the two stages on that Dask cluster's workers."""
    from .tuning import tune

    try:
        import cloudpickle
        from distributed import Client
    except ImportError:
        raise CliError("--scheduler needs Dask distributed: pip install 'mgpu_lab[distributed]'") from None
    module = sys.modules.get(getattr(getattr(make_kernel, "func", make_kernel), "__module__", ""))
    if module is not None and module.__name__.startswith(PRIVATE_MODULE_PREFIX):
        cloudpickle.register_pickle_by_value(module)  # the workers cannot import the setup file by name
    client = _connect_scheduler(Client, address)
    try:
        with client:
            return tune(**problem, use_cache=use_cache, cluster=client)
    except Exception as e:
        if not _connection_lost(e, client):
            raise
        raise CliError(f"--scheduler: the connection to the Dask scheduler at {address!r} was lost during the tune "
                       f"({type(e).__name__}: {_first_line(e) or 'no details'}); is the scheduler still "
                       f"running?") from None


def _connection_lost(error: BaseException, client: Any) -> bool:
    """Whether `error` means the Dask client or its scheduler went away mid-tune (a user's
    cluster problem: one line), not a bug in mgpu_lab (which keeps its traceback)."""
    from concurrent.futures import CancelledError

    from distributed.client import ClosedClientError
    from distributed.comm import CommClosedError

    if isinstance(error, (ClosedClientError, CommClosedError, CancelledError)):
        return True
    if isinstance(error, RuntimeError) and "IOLoop is closed" in str(error):
        return True
    return getattr(client, "status", None) in ("closing", "closed")


# Dask's own connect timeout is 30 s; a scheduler that answers at all answers within this.
SCHEDULER_CONNECT_TIMEOUT_S = 5.0


def _connect_scheduler(client_class: Any, address: str) -> Any:
    """A Dask Client of the scheduler at `address`, or a one-line CliError within seconds.

    A TCP address is tried with a plain socket first: a closed port is refused at once,
    where the Client would retry until its timeout."""
    import socket

    from distributed.comm import parse_address, parse_host_port

    problem = None
    try:
        scheme, location = parse_address(address)
        if scheme in ("tcp", "tls"):
            socket.create_connection(parse_host_port(location), timeout=SCHEDULER_CONNECT_TIMEOUT_S).close()
        return client_class(address, timeout=SCHEDULER_CONNECT_TIMEOUT_S)
    except (OSError, ValueError, TypeError) as e:  # refused, unknown host, timed out, malformed
        problem = f"{type(e).__name__}: {_first_line(e) or 'no details'}"
    raise CliError(f"--scheduler: expected the address of a running Dask scheduler (tcp://host:8786), got "
                   f"{address!r}, which cannot be reached ({problem})")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mgpu-lab", description="Write, run, profile and ship Hopper kernels.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="build, compile (and with a GPU, run and check) the example kernels")
    p.set_defaults(func=_demo)

    p = sub.add_parser("compile", help="compile FILE.py:NAME and print its artifacts")
    p.add_argument("kernel", help="FILE.py:NAME, a Kernel or a function returning one")
    p.add_argument("--ptx", action="store_true", help="print the PTX")
    p.add_argument("--sass", action="store_true", help="print the SASS")
    p.add_argument("--ir", action="store_true", help="print the MLIR module as built")
    p.add_argument("--resources", action="store_true", help="print registers, smem, spills")
    p.add_argument("--out", help="write every artifact to this folder")
    p.set_defaults(func=_compile)

    p = sub.add_parser("export", help="write FILE.py:NAME as a standalone module")
    p.add_argument("kernel", help="FILE.py:NAME")
    p.add_argument("output", help="the module to write, e.g. my_kernel.py")
    p.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    p.set_defaults(func=_export)

    p = sub.add_parser("tune", help="tune the problem FILE.py:NAME describes; print the table")
    p.add_argument("setup", help="FILE.py:NAME, a function returning dict(make_kernel=, space=, args=, reference=)")
    p.add_argument("--export", help="also export the best kernel to this .py module")
    p.add_argument("--no-cache", action="store_true", help="ignore a cached best configuration")
    p.add_argument("--overwrite", action="store_true", help="let --export replace an existing file")
    p.add_argument("--scheduler", metavar="ADDRESS", help="tune on this Dask cluster (tcp://host:8786): compiles "
                   "on its workers, timings on workers started with --resources GPU=1")
    p.set_defaults(func=_tune)

    trace = sub.add_parser("trace", help="inspect profiler traces saved with Trace.save")
    tsub = trace.add_subparsers(dest="trace_command", required=True)
    p = tsub.add_parser("summary", help="per-region table of a trace")
    p.add_argument("file")
    p.set_defaults(func=_trace_summary)
    p = tsub.add_parser("convert", help="write a trace as Perfetto protobuf or Chrome JSON")
    p.add_argument("file")
    p.add_argument("-o", "--output", required=True, help="output file (.json: Chrome, else Perfetto)")
    p.add_argument("--to", choices=("perfetto", "chrome"), help="format (default: from the extension)")
    p.set_defaults(func=_trace_convert)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. User errors print one line (no traceback) and exit 2; a failed check or
    a missing tool exits 1; a bug in mgpu_lab keeps its traceback."""
    from .errors import ToolchainError
    from .user_errors import is_user_input_error

    args = build_parser().parse_args(argv)
    where = f"mgpu-lab {args.command}"
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        print(f"{where}: {e}", file=sys.stderr)
        return 2
    except ToolchainError as e:
        print(f"{where}: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        if not is_user_input_error(e):
            raise  # a bug in mgpu_lab: keep the traceback for the report
        print(f"{where}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    # `python -m mgpu_lab.cli` puts the working folder first on sys.path (and an empty entry in
    # PYTHONPATH means it too): a json.py there would replace the standard library's json for
    # every import that follows. User files are imported by path instead (_load_attribute).
    sys.path[:] = [p for p in sys.path if p not in ("", ".", os.getcwd())]
    sys.exit(main())
