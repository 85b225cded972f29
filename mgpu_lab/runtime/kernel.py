"""`Kernel`: the one launchable type. Whatever `mgpu_lab.kernel`, `%%mosaic`, `make_gemm` (any
variant) and `make_attention` return is a Kernel over a `Program` (program.py), and every tool
takes it the same way: the call, `launch_unchecked`, the profiler's traces, isolation, tuning,
`export`, `show`, `as_torch_op` and the CLI.
"""

from __future__ import annotations

import functools
from typing import Any

from ..compiler.compiled_kernel import CompiledKernel
from ..errors import LaunchArgumentError
from ..user_errors import trim_for_user, user_facing
from .program import Program


def _is_torch_tensor(x: Any) -> bool:
    """Whether `x` is a torch tensor (torch is imported only when `x` may be one)."""
    if type(x).__module__.startswith("torch") and hasattr(x, "data_ptr"):
        import torch

        return isinstance(x, torch.Tensor)
    return False


def _to_jax(result: Any) -> Any:
    """JAX arrays in, JAX arrays out: the outputs cross back through DLPack, without a copy."""
    import jax.dlpack

    if isinstance(result, tuple):
        return tuple(jax.dlpack.from_dlpack(r) for r in result)
    return jax.dlpack.from_dlpack(result)


class _CallSignature:
    """`inspect.signature(kernel)` (IPython's `kernel?`): the call's signature on an instance,
    nothing on the class (whose signature stays its constructor's)."""

    def __get__(self, kernel: Any, owner: type | None = None) -> Any:
        if kernel is None:
            return None
        import inspect

        return inspect.signature(kernel._call_general)


def _not_loaded(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a Kernel's call is installed by its __init__")


def _rebuild(program: Program, isolate: bool | None) -> "Kernel":
    """Unpickles a Kernel (`Kernel.__reduce__`)."""
    return Kernel(program, isolate=isolate)


class Kernel(functools.partial):
    """A compiled program you call like a function: `kernel(*inputs)` returns its output (or a
    tuple of them). Inputs may be CuPy arrays, torch tensors, JAX arrays or any CUDA array with
    DLPack / the CUDA array interface; outputs come back in the framework of the inputs (torch in,
    torch out, on torch's current stream; JAX in, JAX out through DLPack; otherwise CuPy arrays,
    on CuPy's current stream).

    `kernel.program` is what it runs (launches, scratch buffers, copies: plain data);
    `kernel.compiled` is its main kernel's CompiledKernel (PTX, SASS, resources, smem layout, IR
    passes) and `kernel.launches` every launch's."""

    # A Kernel is a functools.partial over its own call function (see `_install_call`): the
    # call then reaches that function through C (vectorcall on Python 3.12+), where a Python
    # `__call__` costs a method lookup, an args tuple and a kwargs dict (~0.2 us per call).
    def __new__(cls, program: Program | CompiledKernel, *, may_alias: Any = None,
                isolate: bool | None = None) -> "Kernel":
        return super().__new__(cls, _not_loaded)

    def __init__(self, program: Program | CompiledKernel, *, may_alias: Any = None, isolate: bool | None = None):
        if isinstance(program, CompiledKernel):
            program = Program.single(program, may_alias)
        elif not isinstance(program, Program):
            raise TypeError(f"program: expected an mgpu_lab Program or CompiledKernel, got {type(program).__name__}")
        self.program = program
        self._launcher = None
        self._torch_fast = None
        self.isolate = isolate  # None: follow mgpu_lab.isolated() / set_isolation(); installs the call

    def __reduce__(self) -> tuple:
        """Picklable (tuning moves Kernels between processes): the program and the isolation
        choice; the loaded modules stay behind and load again where it is called."""
        return _rebuild, (self.program, self._isolate)

    def __get__(self, instance: Any, owner: type | None = None) -> "Kernel":
        """A Kernel kept as a class attribute stays itself on an instance (Python 3.14 makes a
        plain partial bind like a method)."""
        return self

    def _install_call(self, call: Any) -> None:
        """Make `call` what `kernel(...)` runs (`_call_general`, or a generated front call)."""
        functools.partial.__setstate__(self, (call, (), None, self.__dict__))

    @property
    def _call(self) -> Any:
        """What `kernel(...)` runs now: the partial's function."""
        return self.func

    @property
    def isolate(self) -> bool | None:
        """Whether every call runs in the isolated GPU worker (None: follow the process-wide switch,
        `mgpu_lab.isolated()` / `set_isolation()`)."""
        return self._isolate

    @isolate.setter
    def isolate(self, value: bool | None) -> None:
        self._isolate = value
        self._install_call(self._call_general)  # the fast call is derived again on the next call that may use it

    # -- what it is ------------------------------------------------------------------------
    @property
    def compiled(self) -> CompiledKernel:
        """The main kernel's CompiledKernel (the first launch of the program)."""
        return self.program.main

    @property
    def launches(self) -> tuple[CompiledKernel, ...]:
        """Every launch's CompiledKernel, in the order the program runs them."""
        return tuple(launch.compiled for launch in self.program.launches)

    @property
    def name(self) -> str:
        return self.program.name

    @property
    def may_alias(self) -> Any:
        return self.program.may_alias

    @property
    def inputs(self) -> tuple:
        """The user's inputs (ArraySpec: shape, dtype)."""
        return self.program.inputs

    @property
    def outputs(self) -> tuple:
        return self.program.outputs

    @property
    def config(self) -> dict:
        """What the builder chose (e.g. a GEMM's tiles), for people and tuners; may be empty."""
        return dict(self.program.notes)

    # -- running ---------------------------------------------------------------------------
    @property
    def launcher(self) -> Any:
        """The in-process ProgramLauncher (loads the modules on first use): what wrappers that
        launch it as part of something else call as `launcher.call(inputs, out, stream)`."""
        return self._launcher or self._new_launcher()

    def _new_launcher(self) -> Any:
        from .launcher import Launcher
        from .program_runner import ProgramLauncher

        launchers = [Launcher(launch.compiled, launch.may_alias) for launch in self.program.launches]
        self._launcher = ProgramLauncher(self.program.to_dict(), launchers=launchers, error=LaunchArgumentError)
        self._settings, self._ndarray = launchers[0].isolation, launchers[0]._ndarray
        return self._launcher

    def _isolated(self, isolate: bool | None) -> bool:
        """Whether this call runs in the isolated worker: `isolate`, else the Kernel's own choice,
        else the process-wide switch (mgpu_lab.isolated() / set_isolation())."""
        if isolate is None:
            isolate = self._isolate
        return bool(isolate or (isolate is None and self._settings.enabled))

    # Each Kernel's own call function, `kernel._call`: `_call_general` until a plain kernel's
    # module is loaded, then one generated function doing the argument checks and the launch
    # (`PortableLauncher.front_call`) that hands anything else back to `_call_general`. A call
    # then costs one function call instead of a method call with `*args` plus a second one
    # (~0.6 us of host time, a tenth of a launch); the partial base adds no Python frame.
    __signature__ = _CallSignature()

    def _call_general(self, *args: Any, out: Any = None, stream: Any = None, isolate: bool | None = None,
                      timeout_s: float | None = None) -> Any:
        """Run on `args`. `out`: output array(s) to write instead of new ones. `stream`: a CuPy
        or torch stream or a raw handle. `isolate=True` runs the launches in the isolated GPU
        worker (a fault raises KernelFaultError instead of poisoning this process) and
        `timeout_s` bounds each there."""
        launcher = self._launcher or self._new_launcher()
        try:
            if args and _is_torch_tensor(args[0]):
                if out is None and stream is None and not self._isolated(isolate):
                    fast = self._torch_fast or self._new_torch_fast(launcher)
                    result = fast(args)
                    if result is not None:
                        return result
                return self._call_torch(launcher, args, out, stream, isolate, timeout_s)
            if self._isolated(isolate):
                return self._call_isolated(launcher, args, out, stream, timeout_s)
            result = launcher.call(args, out, stream)
            single = launcher.single
            if single is not None and not self._isolate and "call" in single.__dict__ \
                    and self._call == self._call_general:
                # The module is loaded: from now on a call is the generated checks and launch.
                self._install_call(single.front_call(self._general_from_front, self._settings, trim_for_user))
            if out is None and args and type(args[0]).__module__.startswith(("jax", "jaxlib")):
                return _to_jax(result)
            return result
        except Exception as error:
            trim_for_user(error)  # a wrong argument shows the caller's line, not the launcher's
            raise

    def _general_from_front(self, args: tuple, out: Any, stream: Any, isolate: bool | None,
                            timeout_s: float | None) -> Any:
        """What the fast call hands back: everything but CuPy arrays matching exactly."""
        return self._call_general(*args, out=out, stream=stream, isolate=isolate, timeout_s=timeout_s)

    def _new_torch_fast(self, launcher: Any) -> Any:
        import torch

        from .torch_arrays import torch_fast_path

        self._torch_fast = torch_fast_path(torch, self.program, launcher)
        return self._torch_fast

    def _call_torch(self, launcher: Any, args: tuple, out: Any, stream: Any, isolate: bool | None,
                    timeout_s: float | None) -> Any:
        """Torch tensors in: outputs from torch's allocator on the inputs' device, the launch on
        torch's current stream of that device (unless `stream` is given), torch tensors out."""
        import torch

        from .torch_arrays import cupy_views, torch_outputs

        device = args[0].device
        if out is None:
            outs = torch_outputs(torch, self.program.outputs, device)
            out_arg = outs[0] if len(outs) == 1 else tuple(outs)
        else:
            outs, out_arg = None, out
        declared = [s.dtype for s in self.program.inputs], [s.dtype for s in self.program.outputs]
        views = cupy_views(args, declared[0], launcher.in_specs)
        out_views = cupy_views(out_arg if isinstance(out_arg, (tuple, list)) else (out_arg,), declared[1],
                               launcher.out_specs)
        if stream is None and device.type == "cuda":
            stream = torch.cuda.current_stream(device).cuda_stream
        import cupy

        with cupy.cuda.Device(device.index if device.type == "cuda" else None):
            out_views = out_views[0] if len(out_views) == 1 else tuple(out_views)
            if self._isolated(isolate):
                self._call_isolated(launcher, views, out_views, stream, timeout_s)
            else:
                launcher.call(tuple(views), out_views, stream)
        if outs is None:
            return out
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _call_isolated(self, launcher: Any, args: tuple, out: Any, stream: Any, timeout_s: float | None) -> Any:
        """Check the arguments here, then run each launch in the isolated GPU worker."""
        from .isolation import launch_isolated

        if len(args) != launcher.n_in:
            return launcher.call(tuple(args), out, stream)  # raises the argument-count error
        device = launcher.checker.device_for(tuple(args), out)
        arrays, _ = launcher.checker.checked(tuple(args), out, device)
        launcher.run(arrays, device, stream,
                     launch=lambda step, step_arrays, s: launch_isolated(step, list(step_arrays), device, s, timeout_s))
        outs = arrays[launcher.n_in:]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def scratch_buffers(self, stream: Any = None) -> list:
        """The scratch buffers this Kernel keeps for the current device and `stream` (CuPy's current
        one by default), in the program's order, allocated on first use: to look at (stream-K's
        flags are zero after every call) or to poison in a test."""
        launcher = self._launcher or self._new_launcher()
        return launcher.scratch_buffers(launcher.checker._get_device(), launcher.checker.stream_pointer(stream))

    def launch_unchecked(self, *arrays: Any, stream: Any = None) -> None:
        """Launch on CuPy arrays (inputs, then outputs) skipping every argument check.

        Call the kernel normally once first; this is for hot loops where the checks' few
        microseconds matter. Wrong arguments here are undefined behaviour on the GPU."""
        launcher = self._launcher or self._new_launcher()
        if self._isolated(None):
            from .isolation import launch_isolated

            device = launcher.checker._get_device()
            launcher.run(arrays, device, stream,
                         launch=lambda step, step_arrays, s: launch_isolated(step, list(step_arrays), device, s))
        else:
            launcher.unchecked(arrays, stream)

    def as_torch_op(self, qualname: str) -> Any:
        """Register this kernel as the PyTorch custom op `qualname` ("namespace::name") and return it.

        `torch.ops.namespace.name(*inputs)` then runs every launch on torch's current stream with
        outputs and scratch buffers from torch's allocator (so CUDA graphs capture it), and
        `torch.compile(fullgraph=True)` traces through it. An exported module offers the same."""
        from .torch_op import register_torch_op

        return register_torch_op(self.launcher, qualname)

    # -- after a run -----------------------------------------------------------------------
    @property
    def last_traces(self) -> tuple:
        """The profiler Trace of each launch of the most recent call (None where a launch is not
        profiled, or before the first call)."""
        if self._launcher is None:
            return tuple(None for _ in self.program.launches)
        return tuple(launcher.last_trace for launcher in self._launcher.launchers)

    @property
    def last_trace(self) -> Any:
        """The profiler Trace of the most recent call: the first profiled launch's (a library GEMM
        profiles its main kernel); `last_traces` has every launch's. None if not profiled."""
        return next((trace for trace in self.last_traces if trace is not None), None)

    @user_facing
    def export(self, path: str, overwrite: bool = False) -> Any:
        """Write a standalone Python module running the whole program (every launch, its scratch
        buffers, pads and crops) with numpy, CuPy and cuda-bindings only (`mgpu_lab.export`).
        An existing file is only replaced with overwrite=True."""
        from .export import export

        return export(self, path, overwrite=overwrite)

    def __repr__(self) -> str:
        r = self.compiled.resources
        head = (f"<mgpu_lab.Kernel {self.name} {self.compiled.target} grid={self.compiled.grid} "
                f"block={self.compiled.block} regs={r.registers} smem={r.total_smem_bytes}B")
        launches = self.program.launches
        if len(self.program.steps) > 1 or self.program.scratch:
            head += (f", {len(launches)} launch(es) ({', '.join(l.compiled.name for l in launches)}), "
                     f"{len(self.program.scratch)} scratch buffer(s), {len(self.program.steps)} steps")
        return head + ">"
