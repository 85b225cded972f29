"""`Program`: what one `Kernel` runs, as plain picklable data.

A program is the user's signature (inputs in, outputs out), the scratch buffers it needs and an
ordered list of steps over named arrays:

- `Launch`: one `CompiledKernel`, each of its parameters bound to a user input, a user output or
  a scratch buffer (`Ref`);
- `Copy`: the leading box that two arrays share, copied from one into the other, which is how a
  padded GEMM pads its operands (a larger zeroed scratch buffer) and crops its result.

A plain kernel is a program of one launch whose parameters are the user's arrays in order. A
workspace split-K GEMM is two launches through an f32 scratch buffer; a stream-K GEMM is one
launch with a scratch workspace and zero-filled flags; a padded GEMM is copies around either.
Everything that runs a kernel (the call, torch ops, isolation, tuning, export, the viewers)
reads this one description, so none of them can compute something else than another.

`to_dict()` is the form the launchers work from (`program_runner.py`), and what an exported
module embeds, compared in tests with the in-process one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from ..compiler.compiled_kernel import ArraySpec, CompiledKernel
from ..errors import LaunchArgumentError

REF_KINDS = ("input", "output", "scratch")


@dataclass(frozen=True)
class Ref:
    """An array of the program: user input `index`, user output `index`, or scratch `index`."""

    kind: str
    index: int

    def __post_init__(self) -> None:
        if self.kind not in REF_KINDS or not isinstance(self.index, int) or self.index < 0:
            raise ValueError(f"Ref: expected a kind in {REF_KINDS} and an index >= 0, got {self.kind!r}, "
                             f"{self.index!r}")


def inputs(count: int) -> tuple[Ref, ...]:
    """Refs of the first `count` user inputs, in order."""
    return tuple(Ref("input", i) for i in range(count))


@dataclass(frozen=True)
class Scratch:
    """A buffer the program needs besides the user's arrays. `zeroed`: filled with zeros when
    allocated; a program whose steps need zeros there on every call either rewrites them itself
    (stream-K's flags are reset by the kernel that waited on them) or never writes them (the
    padding of a padded operand). Buffers are kept per device and stream between calls; torch
    ops take fresh ones from torch's allocator on every call."""

    shape: tuple[int, ...]
    dtype: str
    zeroed: bool = False
    name: str = ""


@dataclass(frozen=True)
class Launch:
    """One kernel launch: `args` binds its inputs then its outputs, in its own order."""

    compiled: CompiledKernel
    args: tuple[Ref, ...]
    may_alias: Any = None  # the launch's own declared in-place pairs, as `alias_pairs` keeps them


@dataclass(frozen=True)
class Copy:
    """Copy the leading box common to `source` and `target` (same dtype and rank): a pad when the
    target is larger, a crop when the source is."""

    source: Ref
    target: Ref


Step = Union[Launch, Copy]


@dataclass(frozen=True)
class Program:
    """The ordered launches, scratch buffers and copies one Kernel runs (see the module doc)."""

    name: str
    inputs: tuple[ArraySpec, ...]
    outputs: tuple[ArraySpec, ...]
    steps: tuple[Step, ...]
    scratch: tuple[Scratch, ...] = ()
    may_alias: Any = None  # user outputs that may overlap user inputs (single-launch programs)
    notes: dict = field(default_factory=dict, compare=False)  # e.g. the GEMM's tiling, for people

    def __post_init__(self) -> None:
        check_program(self)

    @classmethod
    def single(cls, compiled: CompiledKernel, may_alias: Any = None) -> Program:
        """The program of one kernel whose parameters are the user's arrays in order."""
        from .launcher import alias_pairs

        pairs = alias_pairs(may_alias, len(compiled.inputs), len(compiled.outputs))
        n_in, n_out = len(compiled.inputs), len(compiled.outputs)
        args = inputs(n_in) + tuple(Ref("output", i) for i in range(n_out))
        return cls(compiled.name, tuple(compiled.inputs), tuple(compiled.outputs),
                   (Launch(compiled, args, pairs),), may_alias=pairs)

    @property
    def launches(self) -> tuple[Launch, ...]:
        return tuple(s for s in self.steps if isinstance(s, Launch))

    @property
    def main(self) -> CompiledKernel:
        """The program's main kernel (its first launch): what `Kernel.compiled` shows."""
        return self.launches[0].compiled

    @property
    def is_single(self) -> bool:
        """One launch straight on the user's arrays, in order: the launcher's fastest path."""
        if len(self.steps) != 1 or self.scratch or not isinstance(self.steps[0], Launch):
            return False
        launch = self.steps[0]
        return launch.args == inputs(len(self.inputs)) + tuple(Ref("output", i) for i in range(len(self.outputs)))

    def spec_of(self, ref: Ref) -> tuple[tuple[int, ...], str]:
        """(shape, dtype) of the array `ref` names."""
        if ref.kind == "scratch":
            s = self.scratch[ref.index]
            return tuple(s.shape), s.dtype
        s = (self.inputs if ref.kind == "input" else self.outputs)[ref.index]
        return tuple(s.shape), s.dtype

    def to_dict(self) -> dict:
        """The plain-data program the launchers (and exported modules) run: launch specs with
        their cubins, steps as [kind, index] references, scratch as [shape, dtype, fill, name]."""
        from .launcher import launch_spec

        launches = self.launches
        index = {id(launch): i for i, launch in enumerate(launches)}
        steps = []
        for step in self.steps:
            if isinstance(step, Launch):
                steps.append({"launch": index[id(step)], "args": [[r.kind, r.index] for r in step.args]})
            else:
                steps.append({"copy": [[step.source.kind, step.source.index], [step.target.kind, step.target.index]]})
        return {
            "name": self.name,
            "inputs": [(list(s.shape), s.dtype) for s in self.inputs],
            "outputs": [(list(s.shape), s.dtype) for s in self.outputs],
            "scratch": [(list(s.shape), s.dtype, "zeros" if s.zeroed else "empty", s.name) for s in self.scratch],
            "may_alias": self.may_alias or [],
            "launches": [launch_spec(launch.compiled, launch.may_alias) for launch in launches],
            "steps": steps,
        }


def check_program(program: Program) -> None:
    """Refuse a program whose steps do not fit together: every Ref in range, every launch's
    arrays of the shapes and dtypes its kernel declares, copies between arrays of one dtype and
    rank, every user output written by some step."""
    _check_fields(program)
    counts = {"input": len(program.inputs), "output": len(program.outputs), "scratch": len(program.scratch)}
    if not program.steps:
        raise LaunchArgumentError(f"program {program.name!r}: expected at least one step, got none")
    written = set()
    for n, step in enumerate(program.steps):
        refs = step.args if isinstance(step, Launch) else (step.source, step.target)
        for ref in refs:
            if ref.index >= counts[ref.kind]:
                raise LaunchArgumentError(f"program {program.name!r}, step {n}: {ref.kind} {ref.index} does not "
                                          f"exist (the program has {counts[ref.kind]})")
        if isinstance(step, Launch):
            declared = tuple(step.compiled.inputs) + tuple(step.compiled.outputs)
            if len(step.args) != len(declared):
                raise LaunchArgumentError(f"program {program.name!r}, step {n}: kernel {step.compiled.name} takes "
                                          f"{len(declared)} arrays, the step binds {len(step.args)}")
            for ref, spec in zip(step.args, declared):
                if program.spec_of(ref) != (tuple(spec.shape), spec.dtype):
                    raise LaunchArgumentError(
                        f"program {program.name!r}, step {n}: {ref.kind} {ref.index} is "
                        f"{program.spec_of(ref)}, kernel {step.compiled.name} expects {(tuple(spec.shape), spec.dtype)}")
            written.update(r for r in step.args[len(step.compiled.inputs):] if r.kind == "output")
        else:
            (src_shape, src_dtype), (dst_shape, dst_dtype) = program.spec_of(step.source), program.spec_of(step.target)
            if src_dtype != dst_dtype or len(src_shape) != len(dst_shape):
                raise LaunchArgumentError(f"program {program.name!r}, step {n}: a copy needs one dtype and rank, got "
                                          f"{src_shape} {src_dtype} -> {dst_shape} {dst_dtype}")
            if step.target.kind == "input":
                raise LaunchArgumentError(f"program {program.name!r}, step {n}: a step must not write a user input")
            written.add(step.target)
    missing = [i for i in range(len(program.outputs)) if Ref("output", i) not in written]
    if missing:
        raise LaunchArgumentError(f"program {program.name!r}: no step writes output(s) {missing}")


def _check_fields(program: Program) -> None:
    """Each field of the kind it must be, so a wrong one is named here, not failed on later."""
    def refuse(field_name: str, expected: str, value: Any) -> LaunchArgumentError:
        return LaunchArgumentError(f"Program {field_name}: expected {expected}, got {type(value).__name__} {value!r:.80}")

    if not isinstance(program.name, str):
        raise refuse("name", "a str", program.name)
    for field_name, kind, expected in (("inputs", ArraySpec, "a tuple of ArraySpec"),
                                       ("outputs", ArraySpec, "a tuple of ArraySpec"),
                                       ("steps", (Launch, Copy), "a tuple of Launch and Copy steps"),
                                       ("scratch", Scratch, "a tuple of Scratch")):
        value = getattr(program, field_name)
        if not isinstance(value, (tuple, list)) or not all(isinstance(v, kind) for v in value):
            raise refuse(field_name, expected, value)


def padded(program: Program, user_inputs: tuple[ArraySpec, ...], user_outputs: tuple[ArraySpec, ...],
           name: str | None = None) -> Program:
    """`program` run on arrays of smaller shapes (`user_inputs`, `user_outputs`, one per array
    of the program, same dtypes and ranks): each input whose shape differs is copied into the
    leading box of a zero-filled scratch buffer of the program's shape first (the rest of the
    buffer stays zero: no step writes an input), each such output is computed into a scratch
    buffer and its leading box copied out last. How a GEMM serves rows TMA cannot address."""
    if len(user_inputs) != len(program.inputs) or len(user_outputs) != len(program.outputs):
        raise LaunchArgumentError(f"padded {program.name!r}: expected {len(program.inputs)} inputs and "
                                  f"{len(program.outputs)} outputs, got {len(user_inputs)} and {len(user_outputs)}")
    scratch = list(program.scratch)
    before: list[Step] = []
    after: list[Step] = []
    remap: dict[Ref, Ref] = {}
    for kind, mine, theirs in (("input", program.inputs, user_inputs), ("output", program.outputs, user_outputs)):
        for i, (inner, user) in enumerate(zip(mine, theirs)):
            if tuple(inner.shape) == tuple(user.shape):
                continue
            buffer = Ref("scratch", len(scratch))
            scratch.append(Scratch(tuple(inner.shape), inner.dtype, zeroed=kind == "input", name=f"padded_{kind}_{i}"))
            remap[Ref(kind, i)] = buffer
            if kind == "input":
                before.append(Copy(Ref("input", i), buffer))
            else:
                after.append(Copy(buffer, Ref("output", i)))
    offset = len(program.scratch)  # the inner program's own scratch keeps its indexes

    def moved(ref: Ref) -> Ref:
        return remap.get(ref, ref) if ref.kind != "scratch" or ref.index < offset else ref

    steps = [Launch(s.compiled, tuple(moved(r) for r in s.args), s.may_alias) if isinstance(s, Launch)
             else Copy(moved(s.source), moved(s.target)) for s in program.steps]
    return Program(name or program.name, tuple(user_inputs), tuple(user_outputs), tuple(before + steps + after),
                   tuple(scratch), notes=dict(program.notes))
