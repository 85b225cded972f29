"""IPython magics: `%%mosaic` builds a kernel from a cell, `%mosaic_show` shows it again.

    %load_ext mgpu_lab

    %%mosaic vadd --grid "N // 1024" --block 256 --in a=sd --in b=sd --out c=sd --show sass,smem
    i = (dsl.block_idx() * 256 + dsl.thread_idx()) * 4
    v4 = dsl.ir.VectorType.get([4], dsl.ir.F32Type.get())
    dsl.vector.store(dsl.vector.load(v4, a, [i]) + dsl.vector.load(v4, b, [i]), c, [i])

The cell is the kernel body, run in the notebook's namespace with `ctx`, the named arrays and
`smem` in scope; NAME is bound to the compiled, callable kernel (a NAME that would replace an
imported module or shadow a builtin is refused; one holding another value warns). Option values (--grid,
--block, --cluster, --smem, and the right-hand sides of --in/--out) are Python expressions
evaluated in the notebook's namespace (quote any with spaces). Errors point at the cell's own lines.
`--isolate` runs the kernel's launches in the isolated GPU worker (a fault raises
KernelFaultError instead of killing the notebook); `%mosaic_config isolate=on` does so for
every kernel of the notebook.
"""

from __future__ import annotations

import argparse
import ast
import shlex
from typing import Any

from .compiler.kernel_names import kernel_name_from
from .errors import MgpuLabError
from .user_errors import user_facing

VIEWS = ("timeline", "sass", "smem", "ir")


class MagicArgumentError(MgpuLabError, ValueError):
    """A %%mosaic option is missing or malformed."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print and exit the kernel process
        raise MagicArgumentError(f"%%mosaic: {message}\n{self.format_usage().strip()}")


def parse_magic_line(line: str) -> argparse.Namespace:
    """Parse `NAME [options]` of a %%mosaic line; raises MagicArgumentError with the usage."""
    parser = _Parser(prog="%%mosaic", add_help=False)
    parser.add_argument("name")
    parser.add_argument("--grid", required=True)
    parser.add_argument("--block", required=True)
    parser.add_argument("--cluster", default=None)
    parser.add_argument("--smem", default=None)
    parser.add_argument("--in", dest="inputs", action="append", default=[])
    parser.add_argument("--out", dest="outputs", action="append", default=[])
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--profile-capacity", type=int, default=256, help="events per warpgroup")
    parser.add_argument("--profile-buffer", choices=("smem", "global", "auto"), default="auto",
                        help="where events are kept while a block runs (mgpu_lab.kernel's profile_buffer)")
    parser.add_argument("--show", default="")
    parser.add_argument("--dump", default=None)
    parser.add_argument("--tune", default=None, help="dict expression: name -> values the cell reads")
    parser.add_argument("--args", default=None, help="tuple expression: inputs to time candidates on")
    parser.add_argument("--reference", default=None, help="callable expression: reference(*args)")
    parser.add_argument("--isolate", action="store_true", help="launch in the isolated GPU worker")
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise MagicArgumentError(f"%%mosaic: {e} in {line!r}") from None
    args = parser.parse_args(words)
    if not args.name.isidentifier():
        raise MagicArgumentError(f"%%mosaic: NAME must be a Python identifier, got {args.name!r}")
    for flag, items in (("--in", args.inputs), ("--out", args.outputs)):
        for item in items:
            name, eq, expr = item.partition("=")
            if not eq or not name.strip().isidentifier() or not expr.strip():
                raise MagicArgumentError(f"%%mosaic: {flag} expects NAME=EXPR (e.g. a=sd), got {item!r}")
    views = [v for v in args.show.split(",") if v]
    bad = [v for v in views if v not in VIEWS]
    if bad:
        raise MagicArgumentError(f"%%mosaic: --show takes a comma list of {', '.join(VIEWS)}; got {', '.join(bad)}")
    args.show = views
    if args.tune and not args.args:
        raise MagicArgumentError("%%mosaic: --tune needs --args (the inputs to time the candidates on)")
    return args


_SWITCH_WORDS = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False}
CONFIG_KEYS = {"isolate": "on|off: every launch of this process runs in the isolated GPU worker"}


def parse_config_line(line: str) -> dict[str, bool]:
    """`%mosaic_config key=value ...` as a dict; MagicArgumentError names a bad key or value."""
    settings = {}
    for word in line.split():
        key, eq, value = word.partition("=")
        if not eq or key not in CONFIG_KEYS:
            known = "; ".join(f"{k}={v}" for k, v in CONFIG_KEYS.items())
            raise MagicArgumentError(f"%mosaic_config: expected key=value with a key of: {known}; got {word!r}")
        if value.lower() not in _SWITCH_WORDS:
            raise MagicArgumentError(f"%mosaic_config: {key} takes on or off, got {value!r}")
        settings[key] = _SWITCH_WORDS[value.lower()]
    return settings


def body_from_cell(name: str, params: list[str], cell: str, filename: str, first_line: int = 1) -> Any:
    """Compile the cell into `def name(ctx, *params, smem): <cell>` keeping the cell's line numbers.

    `first_line`: the line the cell's text starts on in the editor (2 under a `%%mosaic` line)."""
    tree = ast.parse(cell, filename=filename)
    ast.increment_lineno(tree, first_line - 1)
    arguments = ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in ["ctx", *params, "smem"]],
                              kwonlyargs=[], kw_defaults=[], defaults=[])
    extra = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}
    func = ast.FunctionDef(name=name, args=arguments, body=tree.body or [ast.Pass()], decorator_list=[],
                           returns=None, lineno=1, col_offset=0, **extra)
    module = ast.Module(body=[func], type_ignores=[])
    ast.fix_missing_locations(module)
    return compile(module, filename, "exec")


def register_cell(shell: Any, cell: str, header: str = "") -> str:
    """Register the cell's text under IPython's own label for it, 'Cell In[N]', and return that.

    The label is the file name the cell is compiled under, so the MLIR locations, the PTX
    `.file`, the SASS line comments, error messages and IPython's tracebacks all say
    `Cell In[N], line L` with the cell's real execution count. `header`: the `%%mosaic ...`
    line above the body, registered too so line L is the editor's line L."""
    import linecache

    from .user_errors import cell_label

    # IPython prints frames of files in this map as "Cell In[N], line L".
    filename_map = getattr(shell.compile, "_filename_map", None)
    filename_map = filename_map if isinstance(filename_map, dict) else {}
    number = _running_cell_number(filename_map, shell.execution_count)
    label = cell_label(number)
    text = header + cell
    linecache.cache[label] = (len(text), None, text.splitlines(True), label)
    filename_map[label] = number
    return label


def _running_cell_number(filename_map: dict, fallback: int) -> int:
    """The In[N] of the cell being run: IPython compiles each cell under a name it maps to N
    (it has already counted on to N + 1 while the cell runs), so find that frame's name."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        number = filename_map.get(frame.f_code.co_filename)
        if isinstance(number, int):
            return number
        frame = frame.f_back
    return fallback


def check_binding(name: str, ns: dict) -> None:
    """Refuse a NAME that would rebind what the notebook relies on (an imported module such as
    `np`, a keyword or builtin such as `print`); warn when it replaces another value. A kernel
    built before (re-running the cell) is rebound silently."""
    import builtins
    import keyword
    import types

    from .arguments import given
    from .runtime.kernel import Kernel
    from .user_errors import warn_at_user

    if keyword.iskeyword(name):
        raise MagicArgumentError(f"%%mosaic: NAME must not be a Python keyword, got {name!r}")
    value = ns.get(name, _UNBOUND)
    if isinstance(value, types.ModuleType):
        raise MagicArgumentError(f"%%mosaic: NAME {name!r} would replace the module {value.__name__} imported in "
                                 f"this notebook; pick another name")
    if value is _UNBOUND and hasattr(builtins, name):
        raise MagicArgumentError(f"%%mosaic: NAME {name!r} would shadow the builtin {name!r}; pick another name")
    if value is not _UNBOUND and not isinstance(value, Kernel):
        warn_at_user(f"%%mosaic: {name} was {given(value, typed=True)}; it is now the kernel", UserWarning)


_UNBOUND = object()  # "no such name" (None is a value a notebook can hold)


def dump(kernel: Any, name: str, folder: str) -> None:
    """`--dump FOLDER`: write the kernel's artifacts there after it is bound, so a bad folder
    (an existing file, no permission) costs one printed line, not the kernel."""
    try:
        kernel.compiled.save(folder)
    except OSError as e:
        print(f"%%mosaic: --dump {folder!r} could not be written ({e.strerror or type(e).__name__}); "
              f"{name} is built and bound, nothing was dumped")


def text_summary(kernel: Any, views: list[str]) -> str:
    """What the viewers show, as text (for plain IPython and terminals)."""
    ck = kernel.compiled
    r = ck.resources
    lines = [f"{ck.name}: {ck.target} grid={ck.grid} block={ck.block} cluster={ck.cluster}",
             f"  registers {r.registers}, smem {r.total_smem_bytes} B ({r.dynamic_smem_bytes} dynamic), "
             f"spills {r.spill_stores_bytes}/{r.spill_loads_bytes} B, stack {r.stack_frame_bytes} B"]
    if "smem" in views:
        lines.append("  shared memory:")
        for b in ck.smem_layout:
            lines.append(f"    [{b.offset:>7}, {b.offset + b.nbytes:>7})  {b.kind:<8} {b.path} {b.shape} {b.dtype}"
                         + (f" swizzle {b.swizzle}" if b.swizzle else "") + (f" union {b.union}" if b.union >= 0 else ""))
    if "sass" in views:
        instr = [ln.strip() for ln in ck.sass.splitlines() if "/*" in ln and "*/" in ln]
        lines.append(f"  SASS: {len(instr)} instructions; first ones:")
        lines += [f"    {ln}" for ln in instr[:12]]
    if "ir" in views:
        if ck.passes:
            lines.append("  passes: " + ", ".join(name for name, _ in ck.passes))
        else:
            lines.append("  passes: not recorded (build with keep_passes=True or MGPU_LAB_DUMP_PASSES=1)")
    if "timeline" in views:
        trace = kernel.last_trace
        lines.append("  timeline: " + ("no profiled call yet (build with --profile and call the kernel)"
                                       if trace is None else f"{trace.num_events} events\n{trace.summary()}"))
    return "\n".join(lines)


def show(kernel: Any, views: list[str]) -> None:
    """Display the chosen viewers: widgets in a widget frontend, text elsewhere."""
    from IPython.display import display

    try:
        from . import widgets
    except ImportError:
        widgets = None
    if widgets is not None and hasattr(widgets, "show") and _widget_frontend():
        for view in views:
            if view == "timeline":
                trace = kernel.last_trace
                if trace is None:
                    print("timeline: no profiled call yet (build with --profile and call the kernel)")
                else:
                    display(widgets.show(trace))
            else:
                display(widgets.show(kernel.compiled, view))
        return
    print(text_summary(kernel, views))


def _widget_frontend() -> bool:
    try:
        from IPython import get_ipython

        ip = get_ipython()
        return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"
    except ImportError:
        return False


def register(ipython: Any) -> None:
    """Register %%mosaic and %mosaic_show on an IPython shell."""
    from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

    @magics_class
    class MosaicMagics(Magics):
        @cell_magic
        @user_facing
        def mosaic(self, line: str, cell: str) -> None:
            from .builder.kernel import kernel as build_kernel
            from .tuning import tune

            args = parse_magic_line(line)
            ns = self.shell.user_ns
            check_binding(args.name, ns)

            def evaluate(expr: str, what: str, extra: dict | None = None) -> Any:
                try:
                    return eval(expr, {**ns, **extra} if extra else ns)  # noqa: S307 - the user's own expression
                except Exception as e:
                    raise MagicArgumentError(f"%%mosaic: {what}={expr!r} could not be evaluated: "
                                             f"{type(e).__name__}: {e}") from None

            ins = [(n.strip(), evaluate(e, f"--in {n.strip()}")) for n, _, e in (i.partition("=") for i in args.inputs)]
            outs = [(n.strip(), evaluate(e, f"--out {n.strip()}")) for n, _, e in (o.partition("=") for o in args.outputs)]
            # The editor shows the %%mosaic line as the cell's line 1: the body starts on line 2.
            filename = register_cell(self.shell, cell, header=f"%%mosaic {line}\n")
            code = body_from_cell(args.name, [n for n, _ in ins + outs], cell, filename, first_line=2)
            options: dict[str, Any] = {}
            if "ir" in args.show:
                options["keep_passes"] = True  # the IR viewer shows the module after every pass
            if args.profile:
                options["profile_capacity"] = args.profile_capacity
                options["profile_buffer"] = args.profile_buffer

            def make_kernel(**config: Any) -> Any:
                # The cell reads tuning parameters as plain names: they shadow the notebook's.
                scope: dict[str, Any] = {}
                exec(code, {**ns, **config}, scope)  # noqa: S102 - the body function from the user's cell
                return build_kernel(
                    scope[args.name], grid=evaluate(args.grid, "--grid", config),
                    block=evaluate(args.block, "--block", config),
                    in_shapes=[s for _, s in ins], out_shapes=[s for _, s in outs],
                    smem=evaluate(args.smem, "--smem", config) if args.smem else None,
                    cluster=evaluate(args.cluster, "--cluster", config) if args.cluster else (1, 1, 1),
                    name=kernel_name_from(args.name), profile=args.profile, **options)

            if args.tune:
                import concurrent.futures

                space = evaluate(args.tune, "--tune")
                reference = evaluate(args.reference, "--reference") if args.reference else None
                # Cell functions cannot be pickled into worker processes: compile on threads.
                with concurrent.futures.ThreadPoolExecutor(4) as pool:
                    result = tune(make_kernel, space, args=evaluate(args.args, "--args"),
                                  reference=reference, executor=pool, use_cache=False)
                ns[f"{args.name}_tuning"] = result
                print(result)
                if result.best_kernel is None:
                    raise MagicArgumentError(f"%%mosaic --tune: no candidate of {space} built, fit and passed")
                kernel = result.best_kernel
            else:
                kernel = make_kernel()
            if args.isolate:
                kernel.isolate = True  # every call of this kernel runs in the isolated worker
            ns[args.name] = kernel
            if args.dump:
                dump(kernel, args.name, args.dump)
            if args.show:
                show(kernel, args.show)

        @line_magic
        @user_facing
        def mosaic_show(self, line: str) -> None:
            parts = line.split()
            if not parts:
                raise MagicArgumentError("%mosaic_show: usage: %mosaic_show NAME [timeline,sass,smem,ir]")
            kernel = self.shell.user_ns.get(parts[0])
            if kernel is None or not hasattr(kernel, "compiled"):
                raise MagicArgumentError(f"%mosaic_show: {parts[0]!r} is not a kernel built by %%mosaic")
            views = parts[1].split(",") if len(parts) > 1 else list(VIEWS)
            bad = [v for v in views if v not in VIEWS]
            if bad:
                raise MagicArgumentError(f"%mosaic_show: unknown view(s) {', '.join(bad)}; choose from {', '.join(VIEWS)}")
            show(kernel, views)

        @line_magic
        def mosaic_config(self, line: str) -> None:
            from .runtime.isolation import SETTINGS, set_isolation

            settings = parse_config_line(line)
            if "isolate" in settings:
                set_isolation(settings["isolate"])
            print(f"isolate={'on' if SETTINGS.enabled else 'off'}")

    ipython.register_magics(MosaicMagics)
