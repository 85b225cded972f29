"""The `mgpu-lab` command line: demo, compile, export, trace, tune.

Exit codes: 0 success, 1 the work failed (a check, a compile), 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit code 2."""


def _load_attribute(file: str, name: str, what: str) -> Any:
    """Import FILE.py (its folder on sys.path while it loads) and return its attribute NAME."""
    path = Path(file)
    if not path.is_file():
        raise CliError(f"{what}: file {file!r} does not exist")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    # Importable by name afterwards too, so its functions pickle into tuning worker processes.
    sys.path.insert(0, str(path.parent.resolve()))
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    obj = getattr(module, name, None)
    if obj is None:
        raise CliError(f"{what}: {file} has no {name!r}")
    return obj


def load_kernel(target: str) -> Any:
    """`FILE.py:NAME` -> the Kernel it names (a Kernel object, or a function returning one)."""
    file, sep, name = target.rpartition(":")
    if not sep or not file or not name:
        raise CliError(f"KERNEL: expected FILE.py:NAME, got {target!r}")
    obj = _load_attribute(file, name, "KERNEL")
    if callable(obj) and not hasattr(obj, "compiled"):
        obj = obj()
    if not hasattr(obj, "compiled"):
        raise CliError(f"KERNEL: {file}:{name} is neither a Kernel nor a function returning one "
                       f"(got {type(obj).__name__})")
    return obj


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
    from .exporter import export

    kernel = load_kernel(args.kernel)
    try:
        path = export(kernel, args.output)
    except ValueError as e:
        raise CliError(str(e)) from None
    print(f"wrote {path}")
    return 0


def _load_trace(file: str) -> Any:
    from .profiler.trace import Trace

    if not Path(file).is_file():
        raise CliError(f"FILE: trace file {file!r} does not exist")
    try:
        return Trace.load(file)
    except Exception as e:  # noqa: BLE001 - any parse failure is a bad input file
        raise CliError(f"FILE: {file!r} is not a trace saved by Trace.save ({type(e).__name__}: {e})") from None


def _trace_summary(args: argparse.Namespace) -> int:
    trace = _load_trace(args.file)
    print(f"{trace.kernel_name or 'kernel'}: {trace.num_events} events, {trace.duration_ns / 1e3:.1f} us")
    print(trace.summary())
    return 0


def _trace_convert(args: argparse.Namespace) -> int:
    trace = _load_trace(args.file)
    fmt = args.to or ("chrome" if str(args.output).endswith(".json") else "perfetto")
    path = trace.save_chrome_json(args.output) if fmt == "chrome" else trace.save_perfetto(args.output)
    print(f"wrote {path} ({fmt})")
    return 0


def _tune(args: argparse.Namespace) -> int:
    from .autotune import tune

    file, sep, name = args.setup.rpartition(":")
    if not sep:
        raise CliError(f"SETUP: expected FILE.py:NAME, got {args.setup!r}")
    setup = _load_attribute(file, name, "SETUP")
    problem = setup() if callable(setup) else setup
    if not isinstance(problem, dict) or not {"make_kernel", "space", "args"} <= set(problem):
        raise CliError(f"SETUP: {args.setup} must return a dict with make_kernel, space, args (and optionally "
                       f"reference), got {type(problem).__name__}")
    result = tune(**problem, use_cache=not args.no_cache)
    print(result)
    if args.export and result.best_kernel is not None:
        from .exporter import export

        print(f"wrote {export(result.best_kernel, args.export)}")
    return 0 if result.best is not None else 1


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
    p.set_defaults(func=_export)

    p = sub.add_parser("tune", help="tune the problem FILE.py:NAME describes; print the table")
    p.add_argument("setup", help="FILE.py:NAME, a function returning dict(make_kernel=, space=, args=, reference=)")
    p.add_argument("--export", help="also export the best kernel to this .py module")
    p.add_argument("--no-cache", action="store_true", help="ignore a cached best configuration")
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
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        print(f"mgpu-lab {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
