"""Runs a program (`program.py`'s `to_dict()` form): the user's arrays checked once, scratch
buffers kept per device and stream, then each step in order. Self-contained like `portable.py`:
exports copy this source verbatim after it, so an exported module runs a program exactly as
`Kernel.__call__` does. Keep it free of mgpu_lab imports.

A program of one launch on the user's arrays in order (every plain kernel) runs through that
launch's generated call directly: no step loop, no second check.
"""

from __future__ import annotations

from typing import Any

from .portable import ArgumentChecker, PortableLauncher, PortableLaunchError, device_dtype  # (exports: inlined)
from .streams import external_stream  # (exports: inlined)


def _bits(array: Any) -> Any:
    """An unsigned-integer view of the same bytes (CuPy cannot copy bf16 / float8 directly)."""
    import cupy

    return array.view({1: cupy.uint8, 2: cupy.uint16, 4: cupy.uint32, 8: cupy.uint64}[array.dtype.itemsize])


def _is_single(program: dict) -> bool:
    steps = program["steps"]
    n_in, n_out = len(program["inputs"]), len(program["outputs"])
    identity = [["input", i] for i in range(n_in)] + [["output", i] for i in range(n_out)]
    return (len(steps) == 1 and not program["scratch"] and "launch" in steps[0]
            and [list(a) for a in steps[0]["args"]] == identity)


class ProgramLauncher:
    """Checks the user's arrays against the program's signature and runs its steps.

    `launchers`: one launcher per launch (`PortableLauncher` interface) to use instead of new
    ones, e.g. the in-process `Launcher`s that also launch isolated; `tma_encoders`: {launch
    index: encoder} for launches with TMA descriptors. `spec` is the program dict, which is the
    interface `register_torch_op` reads (name, inputs, outputs, scratch)."""

    def __init__(self, program: dict, *, error: type[Exception] = PortableLaunchError,
                 resource_error: type[Exception] = ValueError, tma_encoders: dict | None = None,
                 launchers: list | None = None):
        tma_encoders = tma_encoders or {}
        self.spec = program
        self.name = program["name"]
        self.launchers = launchers if launchers is not None else [
            PortableLauncher(spec, error=error, resource_error=resource_error, tma_encoder=tma_encoders.get(i))
            for i, spec in enumerate(program["launches"])]
        self.checker = ArgumentChecker({"name": program["name"], "inputs": program["inputs"],
                                        "outputs": program["outputs"], "may_alias": program.get("may_alias")}, error)
        self.n_in, self.in_specs, self.out_specs = self.checker.n_in, self.checker.in_specs, self.checker.out_specs
        self.scratch_specs = [(tuple(shape), device_dtype(dtype), fill == "zeros")
                              for shape, dtype, fill, *_ in program["scratch"]]
        self.scratch_names = [entry[3] if len(entry) > 3 else "" for entry in program["scratch"]]
        self.steps = [("launch", self.launchers[s["launch"]], [tuple(a) for a in s["args"]]) if "launch" in s
                      else ("copy", tuple(s["copy"][0]), tuple(s["copy"][1])) for s in program["steps"]]
        self.single = self.launchers[0] if _is_single(program) else None
        self._scratch: dict[tuple[int, int], list] = {}

    def __call__(self, *args: Any, out: Any = None, stream: Any = None) -> Any:
        return self.call(args, out, stream)

    def call(self, args: tuple, out: Any = None, stream: Any = None, scratch: tuple | None = None) -> Any:
        """`self(*args, out=out, stream=stream)`; `scratch`: the program's scratch buffers to use
        (a torch op passes fresh ones from torch's allocator) instead of the kept ones."""
        if self.single is not None:
            return self.single.call(args, out, stream)
        if scratch is not None:
            self._check_scratch(scratch)
        self.checker.check_count(args)
        device = self.checker.device_for(args, out)
        arrays, _ = self.checker.checked(args, out, device)
        self.run(arrays, device, stream, scratch)
        outs = arrays[self.n_in:]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _check_scratch(self, scratch: Any) -> None:
        """Scratch buffers a caller passes: one per declared buffer, of its shape and dtype."""
        error = self.checker._error
        specs = self.scratch_specs
        if len(scratch) != len(specs):
            raise error(f"scratch of {self.name}: expected {len(specs)} buffer(s) "
                        f"{[(shape, dtype.name) for shape, dtype, _ in specs]}, got {len(scratch)}")
        for i, (buffer, (shape, dtype, _)) in enumerate(zip(scratch, specs)):
            what = f"scratch {i} ({self.scratch_names[i]}) of {self.name}"
            if tuple(buffer.shape) != shape:
                raise error(f"{what}: expected shape {shape}, got {tuple(buffer.shape)}")
            if buffer.dtype != dtype:
                raise error(f"{what}: expected dtype {dtype.name}, got {buffer.dtype}")

    def launch_unchecked(self, *arrays: Any, stream: Any = None) -> None:
        """Inputs then outputs, no argument check (hot loops whose arguments a normal call checked)."""
        self.unchecked(arrays, stream)

    def unchecked(self, arrays: tuple, stream: Any = None) -> None:
        if self.single is not None:
            self.single.unchecked(arrays, stream)
        else:
            self.run(arrays, self.checker._get_device(), stream)

    def scratch_buffers(self, device: int, stream: int) -> list:
        """The scratch buffers of (device, stream), allocated (and zero-filled where declared) on
        first use; later calls on that stream reuse them, stream order keeping calls apart."""
        key = (device, stream)
        buffers = self._scratch.get(key)
        if buffers is None:
            cupy = self.checker._cupy
            buffers = [(cupy.zeros if zeroed else cupy.empty)(shape, dtype) for shape, dtype, zeroed in self.scratch_specs]
            cupy.cuda.get_current_stream().synchronize()  # the zero fills ran there, the program runs on `stream`
            self._scratch[key] = buffers
        return buffers

    def run(self, arrays: Any, device: int, stream: Any, scratch: Any = None, launch: Any = None) -> None:
        """Every step on `arrays` (inputs then outputs, checked). `launch(launcher, arrays, stream)`
        replaces the in-process launch (the isolated worker does)."""
        s = self.checker.stream_pointer(stream)
        named = {"input": arrays[: self.n_in], "output": arrays[self.n_in:],
                 "scratch": scratch if scratch is not None else self.scratch_buffers(device, s)}
        for kind, first, second in self.steps:
            if kind == "launch":
                step_arrays = tuple(named[k][i] for k, i in second)
                if launch is None:
                    first.unchecked(step_arrays, s)
                else:
                    launch(first, step_arrays, s)
            else:
                self._copy(named[first[0]][first[1]], named[second[0]][second[1]], s)

    @property
    def has_copies(self) -> bool:
        return any(kind == "copy" for kind, _, _ in self.steps)

    def run_pointers(self, pointers: list, device: int, stream: int, scratch: list | None = None) -> None:
        """Every launch with the user's arrays as data pointers (inputs, then outputs, checked by
        the caller) on `stream` (an int handle): how torch tensors run without CuPy views.
        `scratch`: pointers of the program's scratch buffers to use instead of the kept ones (a
        torch op allocates them per call). Programs with copies need arrays: use `run`."""
        if self.single is not None:
            self.single.launch_pointers(pointers, device, stream)
            return
        if self.has_copies:
            raise ValueError(f"{self.name}: a program with copies runs on arrays, not pointers")
        if scratch is None:
            scratch = [b.data.ptr for b in self.scratch_buffers(device, stream)]
        named = {"input": pointers[: self.n_in], "output": pointers[self.n_in:], "scratch": scratch}
        for _, launcher, args in self.steps:
            launcher.launch_pointers([named[k][i] for k, i in args], device, stream)

    def _copy(self, source: Any, target: Any, stream: int) -> None:
        """The leading box common to both arrays, copied on `stream`."""
        box = tuple(slice(0, min(a, b)) for a, b in zip(source.shape, target.shape))
        with external_stream(stream):
            _bits(target)[box] = _bits(source)[box]

    @property
    def last_profiles(self) -> list:
        """Each launch's last profile buffer (None where it is not profiled)."""
        return [getattr(launcher, "last_profile", None) for launcher in self.launchers]
