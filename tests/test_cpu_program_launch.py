"""A program of several launches on the CPU stand-ins (tests/cupy_stand_in.py): the user's arrays
are checked once against the program's signature, each launch gets its arrays in the order the
program binds them, scratch buffers are kept per stream, and bad input gets the launcher's error
naming the program, the argument, what was expected and what was given."""

from __future__ import annotations

import pytest
from cupy_stand_in import DeviceArray, install, set_current_device

import mgpu_lab
from mgpu_lab.errors import LaunchArgumentError
from mgpu_lab.examples.vector_add import make_vector_add
from mgpu_lab.runtime.program import Launch, Program, Ref, Scratch, inputs

N = 1 << 12


@pytest.fixture(scope="module")
def vadd():
    return make_vector_add(N).compiled


@pytest.fixture
def two_adds(vadd, monkeypatch):
    """out = (a + b) + b, through a scratch buffer: two launches."""
    recorder = install(monkeypatch)
    tmp = Ref("scratch", 0)
    program = Program("two_adds", vadd.inputs, vadd.outputs,
                      (Launch(vadd, inputs(2) + (tmp,)), Launch(vadd, (tmp, Ref("input", 1), Ref("output", 0)))),
                      (Scratch((N,), "float32", name="partial"),))
    kernel = mgpu_lab.Kernel(program)
    kernel.recorder = recorder
    return kernel


def good(shape=(N,), dtype="float32", **kw):
    return DeviceArray(shape, dtype, **kw)


def test_each_launch_gets_its_arrays_and_the_scratch_between_them(two_adds):
    a, b, out = good(), good(), good()
    result = two_adds(a, b, out=out)
    first, second = two_adds.recorder.launches
    scratch = first.pointers[2]
    assert first.pointers == [a.ptr, b.ptr, scratch] and second.pointers == [scratch, b.ptr, out.ptr]
    assert scratch not in (a.ptr, b.ptr, out.ptr) and result.data.ptr == out.ptr
    two_adds(a, b, out=out)
    assert two_adds.recorder.launches[2].pointers[2] == scratch, "the scratch buffer is kept per stream"
    two_adds(a, b, out=out, stream=0x99)
    third = two_adds.recorder.launches[4]
    assert third.stream == 0x99 and third.pointers[2] != scratch, "another stream gets its own scratch"
    assert [s.name for s in two_adds.program.scratch] == ["partial"] and len(two_adds.launches) == 2


def test_launch_unchecked_runs_every_step(two_adds):
    import sys

    cupy = sys.modules["cupy"]  # the stand-in: launch_unchecked takes CuPy arrays
    a, b, out = (cupy.asarray(good()) for _ in range(3))
    two_adds.launch_unchecked(a, b, out)
    assert [len(launch.pointers) for launch in two_adds.recorder.launches] == [3, 3]


@pytest.mark.parametrize("args, out, words", [
    ((good(),), None, ["two_adds takes 2 input", "got 1"]),
    ((good((N - 1,)), good()), None, ["input 0 of two_adds", "expected shape", f"({N},)", f"({N - 1},)"]),
    ((good(), good(dtype="float64")), None, ["input 1 of two_adds", "expected dtype float32", "float64"]),
    ((good(), good()), good((N,), "int32"), ["output 0 of two_adds", "expected dtype float32", "int32"]),
    ((good(), good(strides=(8,))), None, ["input 1 of two_adds", "C-contiguous", "strides (8,)"]),
])
def test_bad_arguments_are_refused_before_any_launch(two_adds, args, out, words):
    with pytest.raises(LaunchArgumentError) as e:
        two_adds(*args, out=out)
    assert all(w in str(e.value) for w in words), str(e.value)
    assert not two_adds.recorder.launches, "nothing may launch (or be half-written) on a refused call"


def test_an_array_on_another_device_is_refused(two_adds):
    a = good(device=1)
    set_current_device(0)
    with pytest.raises(LaunchArgumentError, match="input 0 of two_adds: expected an array on the current device 0"):
        two_adds(a, good())


def test_scratch_buffers_a_caller_passes_are_checked(two_adds):
    """A torch op passes the program's scratch buffers itself: too few, or too small, is refused."""
    launcher = two_adds.launcher
    a, b, out = good(), good(), good()
    with pytest.raises(LaunchArgumentError, match=r"scratch of two_adds: expected 1 buffer\(s\) \[\(\(4096,\), "
                                                  r"'float32'\)\], got 0"):
        launcher.call((a, b), out, None, scratch=())
    with pytest.raises(LaunchArgumentError, match=r"scratch 0 \(partial\) of two_adds: expected shape \(4096,\), "
                                                  r"got \(4095,\)"):
        launcher.call((a, b), out, None, scratch=(good((N - 1,)),))
    assert not two_adds.recorder.launches


def test_without_a_gpu_a_call_says_so_once_and_clearly():
    """This machine (CI) has no GPU: a call does not reach CuPy's cudaErrorInsufficientDriver."""
    from mgpu_lab.compiler.target import device_capability
    from mgpu_lab.runtime.portable import NO_GPU, NoCudaDeviceError

    if device_capability() is not None:
        pytest.skip("this machine has a GPU")
    import numpy as np

    kernel = make_vector_add(N)
    x = np.zeros(N, np.float32)
    with pytest.raises(NoCudaDeviceError, match=NO_GPU):
        kernel(x, x)


def test_without_a_gpu_a_wrong_argument_is_named_before_the_missing_gpu():
    """The argument checks need no CUDA: a wrong shape or dtype is said first, the missing GPU
    only for arguments that would otherwise run."""
    from mgpu_lab.compiler.target import device_capability

    if device_capability() is not None:
        pytest.skip("this machine has a GPU")
    import numpy as np

    kernel = make_vector_add(N)
    with pytest.raises(LaunchArgumentError, match=rf"input 1 of vector_add: expected shape \({N},\), got \(3,\)"):
        kernel(np.zeros(N, np.float32), np.zeros(3, np.float32))
    with pytest.raises(LaunchArgumentError, match="input 0 of vector_add: expected dtype float32, got float64"):
        kernel(np.zeros(N), np.zeros(N, np.float32))


@pytest.mark.parametrize("fields, message", [
    ((3, (), (), ()), r"Program name: expected a str, got int 3"),
    (("p", 1, (), ()), r"Program inputs: expected a tuple of ArraySpec, got int 1"),
    (("p", (), ("not a spec",), ()), r"Program outputs: expected a tuple of ArraySpec, got tuple \('not a spec',\)"),
    (("p", (), (), ("launch",)), r"Program steps: expected a tuple of Launch and Copy steps, got tuple"),
])
def test_a_program_names_a_field_of_the_wrong_kind(fields, message):
    with pytest.raises(LaunchArgumentError, match=message):
        Program(*fields)


def test_a_program_names_scratch_of_the_wrong_kind(two_adds):
    program = two_adds.program
    with pytest.raises(LaunchArgumentError, match=r"Program scratch: expected a tuple of Scratch, got tuple"):
        Program(program.name, program.inputs, program.outputs, program.steps, scratch=((4,), "float32"))
