"""CPU tests of the launcher's argument checks that need no GPU: what is not a device array,
and outputs overlapping inputs (the GPU tests in test_errors_launch_gpu.py call real kernels)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("cupy")

from mgpu_lab.runtime.launcher import alias_pairs  # noqa: E402
from mgpu_lab.runtime.portable import PortableLauncher, PortableLaunchError  # noqa: E402

EXPECTED = r"expected a device array \(CuPy/torch/__cuda_array_interface__/DLPack\)"


def _launcher(may_alias=None, outputs=1):
    spec = {"name": "k", "grid": [1, 1, 1], "block": [128, 1, 1], "cluster": [1, 1, 1], "dynamic_smem": 0,
            "inputs": [([16], "float32"), ([16], "float32")], "outputs": [([16], "float32")] * outputs,
            "params": [("array", i) for i in range(2 + outputs)], "cubin": b"", "profile_words": None,
            "may_alias": may_alias or []}
    launcher = PortableLauncher(spec)
    launcher._get_device = launcher._raw_get_device = lambda: 0  # no CUDA call before the argument checks
    return launcher


@pytest.mark.parametrize("value, shown", [([1.0] * 16, "list"), ((1.0,) * 16, "tuple"), (3.0, "float"),
                                          ("x", "str"), (None, "NoneType")])
def test_what_is_not_an_array_is_named(value, shown):
    with pytest.raises(PortableLaunchError, match=rf"^input 0 of k: {EXPECTED}, got {shown}$"):
        _launcher()(value, value)


def test_a_host_numpy_array_is_told_to_move():
    with pytest.raises(PortableLaunchError, match=rf"input 1 of k: {EXPECTED}, got a host numpy.ndarray; move it"):
        launcher = _launcher()
        launcher._as_device_array(np.ones(16, np.float32), 1, "input", launcher.in_specs[1])


def test_a_host_dlpack_tensor_is_told_to_move():
    class HostTensor:
        def __dlpack__(self, stream=None):
            raise AssertionError("must not be converted")

        def __dlpack_device__(self):
            return (1, 0)

    with pytest.raises(PortableLaunchError, match=rf"input 0 of k: {EXPECTED}, got a .*HostTensor in host memory \(cpu\)"):
        _launcher()(HostTensor(), HostTensor())


def test_an_output_overlapping_an_input_is_refused_naming_both():
    launcher = _launcher()
    launcher._check_aliasing([0x1000, 0x2000, 0x3000])  # apart: fine
    launcher._check_aliasing([0x1000, 0x2000, 0x1040])  # adjacent to input 0's end: fine
    with pytest.raises(PortableLaunchError, match=r"^output 0 of k overlaps input 0 in memory: .*may_alias=\{0: 0\}"):
        launcher._check_aliasing([0x1000, 0x2000, 0x1000])
    with pytest.raises(PortableLaunchError, match=r"^output 0 of k overlaps input 1 in memory"):
        launcher._check_aliasing([0x1000, 0x2000, 0x1ff0])  # its last 16 bytes overlap input 1


def test_declared_aliases_are_allowed_and_only_those():
    launcher = _launcher(may_alias=[[0, 1]])
    launcher._check_aliasing([0x1000, 0x2000, 0x2000])
    with pytest.raises(PortableLaunchError, match="output 0 of k overlaps input 0"):
        launcher._check_aliasing([0x1000, 0x2000, 0x1000])
    _launcher(may_alias=True)._check_aliasing([0x1000, 0x1000, 0x1000])


def test_two_outputs_overlapping_are_refused():
    with pytest.raises(PortableLaunchError, match="output 0 of k overlaps output 1 in memory: two outputs must not share"):
        _launcher(outputs=2, may_alias=True)._check_aliasing([0x1000, 0x2000, 0x3000, 0x3020])


def test_may_alias_declarations_are_validated():
    assert alias_pairs({0: [1, 0]}, 2, 1) == [[0, 0], [0, 1]]
    assert alias_pairs([(0, 1)], 2, 1) == [[0, 1]]
    assert alias_pairs(None, 2, 1) == [] and alias_pairs(True, 2, 1) is True
    with pytest.raises(ValueError, match=r"may_alias: \(1, 0\) is not an \(output index < 1, input index < 2\) pair"):
        alias_pairs({1: 0}, 2, 1)
    with pytest.raises(TypeError, match="may_alias: expected True"):
        alias_pairs("out", 2, 1)


def test_an_array_interface_that_raises_on_access_is_not_fatal():
    """torch computes __cuda_array_interface__ on access and raises KeyError for bfloat16."""

    class Bf16Tensor:
        @property
        def __cuda_array_interface__(self):
            raise KeyError("bfloat16")

        def __dlpack__(self, stream=None):
            raise BufferError("bfloat16 has no DLPack route into CuPy")

        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(PortableLaunchError, match=rf"input 0 of k: {EXPECTED}, got .*Bf16Tensor \("):
        _launcher()(Bf16Tensor(), Bf16Tensor())


class _Memory:
    def __init__(self, ptr, device_id=0):
        self.ptr, self.device_id = ptr, device_id


class _Array:
    """Just the attributes the exact-match check reads from a CuPy array."""

    def __init__(self, ptr, shape=(16,), dtype="float32", contiguous=True, device_id=0):
        self.shape, self.dtype, self._c_contiguous = shape, np.dtype(dtype), contiguous
        self.ndim, self.size = len(shape), int(np.prod(shape))
        self.data = _Memory(ptr, device_id)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]


def test_the_exact_match_check_accepts_only_the_exact_signature():
    from mgpu_lab.runtime.portable import exact_match_checker

    f32 = np.dtype("float32")
    check = exact_match_checker(_Array, [((16,), f32), ((16,), f32), ((16,), f32)], [64, 64, 64], [(2, 0), (2, 1)])
    assert check((_Array(0x1000), _Array(0x2000), _Array(0x3000)), 0) == [0x1000, 0x2000, 0x3000]
    for bad in (_Array(0x3000, shape=(8,)), _Array(0x3000, shape=(4, 4)), _Array(0x3000, shape=()),
                _Array(0x3000, shape=(16, 1, 1)), _Array(0x3000, dtype="float64"), _Array(0x3000, contiguous=False),
                _Array(0x3008), _Array(0x3000, device_id=1), _Array(0x1020), "not an array"):
        assert check((_Array(0x1000), _Array(0x2000), bad), 0) is None, vars(bad) if hasattr(bad, "data") else bad
    assert check((_Array(0x1000), _Array(0x2000)), 0) is None
    assert check((_Array(0x1000), _Array(0x1000), _Array(0x3000)), 0) == [0x1000, 0x1000, 0x3000], \
        "inputs may share memory"
    assert exact_match_checker(_Array, [])((), 0) == []
    one = exact_match_checker(_Array, [((16,), f32)])
    assert one((_Array(0x1000),), 0) == [0x1000]


@pytest.mark.parametrize("spec", [(4, 8), (0, 8), (2, 3, 4), (), (1, 32)])
def test_the_exact_match_check_tells_every_other_shape_apart(spec):
    """1- and 2-D shapes are compared through ndim, len() and size (no tuple built per call):
    every shape of another rank, another first dimension or another size is still refused."""
    from mgpu_lab.runtime.portable import exact_match_checker

    check = exact_match_checker(_Array, [(spec, np.dtype("float32"))])
    assert check((_Array(0x1000, shape=spec),), 0) == [0x1000]
    others = {(32,), (8, 4), (4, 6), (4, 8), (2, 16), (1, 32), (32, 1), (0, 8), (0, 6), (0,), (2, 3, 4), (4, 2, 3),
              (4, 8, 1), (), (1,), (1, 1)} - {spec}
    for shape in sorted(others):
        assert check((_Array(0x1000, shape=shape),), 0) is None, (spec, shape)


def test_may_alias_reaches_the_launcher_from_the_kernel_builder():
    from mgpu_lab.examples.vector_add import make_vector_add

    k = make_vector_add(1024, may_alias={0: 0})
    assert k._new_launcher().single._no_alias == [(2, 1)], "only output 0 against input 1 is still refused"
    assert make_vector_add(1024)._new_launcher().single._no_alias == [(2, 0), (2, 1)]
    with pytest.raises(ValueError, match=r"may_alias: \(0, 5\) is not an \(output index < 1, input index < 2\) pair"):
        make_vector_add(1024, may_alias={0: 5})


def test_exported_module_keeps_the_kernels_declared_aliases(tmp_path):
    from mgpu_lab.examples.vector_add import make_vector_add

    namespace: dict = {}
    path = make_vector_add(1024, may_alias={0: 0}).export(tmp_path / "in_place.py")
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    assert [tuple(pair) for pair in namespace["SPEC"]["may_alias"]] == [(0, 0)]
    assert namespace["vector_add"].single._no_alias == [(2, 1)], "the export must refuse only what the kernel refuses"


# -- the generated call: checks, slot writes and the driver call in one function ------------------
class _DriverError(Exception):
    def __init__(self, status):
        self.status = status


def _with_recorded_driver(monkeypatch, launcher):
    """`launcher` with its module counted as loaded on device 0 and cuLaunchKernel recorded, not
    called: (launcher, launches, recoveries)."""
    from types import SimpleNamespace

    from mgpu_lab.runtime import portable

    launches, recovered = [], []

    def launch(*args):
        launches.append(args)
        if launches[-1][8] == 666:  # a stream the fake driver refuses
            raise _DriverError(201)

    monkeypatch.setattr(portable, "_driver_launch", lambda: (launch, _DriverError))
    launcher._current_stream = lambda device=-1: SimpleNamespace(ptr=7)
    loaded = SimpleNamespace(handle=0x1234, recover=lambda *a: recovered.append(a),
                             launch=lambda stream, argv: launches.append(("explaining path", stream, argv)))
    launcher._loaded(0, loaded)
    return launcher, launches, recovered


@pytest.fixture
def fast_launcher(monkeypatch):
    return _with_recorded_driver(monkeypatch, _launcher())


def _cupy_array(ptr, shape=(16,), dtype="float32", device_id=0, strides=None):
    import cupy

    memory = cupy.cuda.UnownedMemory(ptr, 1 << 12, None, device_id=device_id)
    return cupy.ndarray(shape, np.dtype(dtype), cupy.cuda.MemoryPointer(memory, 0), strides=strides)


def _slot_words(launcher, count):
    return [int(launcher._storage.words[i * 16]) for i in range(count)]


def test_the_generated_call_writes_the_pointers_and_launches(fast_launcher):
    launcher, launches, _ = fast_launcher
    a, b, out = _cupy_array(0x10000), _cupy_array(0x20000), _cupy_array(0x30000)
    assert launcher.call.__name__ == "call" and "call" in launcher.__dict__, "the generated call is installed"
    assert launcher(a, b, out=out) is out
    argv = launcher._storage.argv_address
    assert launches == [(0x1234, 1, 1, 1, 128, 1, 1, 0, 7, argv, 0)]
    assert _slot_words(launcher, 3) == [0x10000, 0x20000, 0x30000]
    launcher(a, b, out=out, stream=99)  # a raw stream handle
    launcher.call((a, b), out, SimpleStream(55))
    assert [call[8] for call in launches[1:]] == [99, 55]
    launcher(a, b, out=(out,), stream=3)  # out as a 1-tuple: accepted by the explaining path
    assert launches[-1] == ("explaining path", 3, argv)
    launcher.launch_unchecked(b, a, out, stream=5)
    assert launches[-1][8] == 5 and _slot_words(launcher, 3) == [0x20000, 0x10000, 0x30000]


class SimpleStream:
    def __init__(self, ptr):
        self.ptr = ptr


@pytest.mark.parametrize("bad, message", [
    (dict(shape=(8,)), "expected shape"), (dict(dtype="float64"), "expected dtype float32"),
    (dict(ptr=0x30008), "expected a 16-byte aligned array"),
    (dict(device_id=1), "expected an array on the current device 0"), (dict(ptr=0x10020), "overlaps input 0")])
def test_the_generated_call_refuses_what_the_explaining_path_refuses(fast_launcher, bad, message):
    launcher, launches, _ = fast_launcher
    a, b = _cupy_array(0x10000), _cupy_array(0x20000)
    out = _cupy_array(**{"ptr": 0x30000, **bad})
    with pytest.raises(PortableLaunchError, match=message):
        launcher(a, b, out=out)
    if "overlaps" not in message:  # inputs may overlap each other
        with pytest.raises(PortableLaunchError, match=f"input 0 of k: {message}"):
            launcher(out, b, out=_cupy_array(0x30000))
    assert launches == []


def test_a_non_contiguous_array_is_refused_by_the_generated_call(fast_launcher):
    launcher, launches, _ = fast_launcher
    strided = _cupy_array(0x30000, shape=(16,), strides=(8,))
    with pytest.raises(PortableLaunchError, match="expected a C-contiguous array"):
        launcher(_cupy_array(0x10000), _cupy_array(0x20000), out=strided)
    with pytest.raises(PortableLaunchError, match="takes 2 input array"):
        launcher(_cupy_array(0x10000))
    assert launches == []


def test_a_failed_driver_launch_goes_to_recovery(fast_launcher):
    launcher, launches, recovered = fast_launcher
    a, b, out = _cupy_array(0x10000), _cupy_array(0x20000), _cupy_array(0x30000)
    launcher(a, b, out=out, stream=666)
    launcher.launch_unchecked(a, b, out, stream=666)
    argv = launcher._storage.argv_address
    assert recovered == [(201, 666, argv)] * 2


def test_with_one_gpu_the_generated_call_reads_no_device(monkeypatch):
    """A process that sees one GPU has every array on device 0 and device 0 current: the
    generated call then asks for neither; with several GPUs it checks each array's device."""
    launcher = _launcher()
    monkeypatch.setattr(launcher, "_one_device", lambda: True)
    launcher._raw_get_device = lambda: pytest.fail("the current device was asked for")
    launcher, launches, _ = _with_recorded_driver(monkeypatch, launcher)
    a, b, out = _cupy_array(0x10000), _cupy_array(0x20000), _cupy_array(0x30000)
    assert launcher(a, b, out=out) is out and launches[-1][0] == 0x1234
    assert launcher(a, _cupy_array(0x20000, device_id=1), out=out) is out, "no other device to be on"
    launcher.launch_unchecked(a, b, out)
    assert len(launches) == 3 and all(launch[0] == 0x1234 for launch in launches)
    with pytest.raises(PortableLaunchError, match=r"input 1 of k: expected shape \(16,\), got \(4, 4\)"):
        launcher(a, _cupy_array(0x20000, shape=(4, 4)), out=out)

    several = _launcher()
    monkeypatch.setattr(several, "_one_device", lambda: False)
    several, launches, _ = _with_recorded_driver(monkeypatch, several)
    with pytest.raises(PortableLaunchError, match="input 1 of k: expected an array on the current device 0, got one on device 1"):
        several(a, _cupy_array(0x20000, device_id=1), out=out)


@pytest.mark.parametrize("n_in, n_out, inline",
                         [(0, 1, True), (2, 0, True), (1, 2, True), (2, 2, False), (0, 0, False)])
def test_generated_call_source_compiles_for_any_arity(n_in, n_out, inline):
    from mgpu_lab.runtime.portable import call_source

    count = n_in + n_out
    source = call_source([(16,)] * count, n_in, [64] * count, [(n_in, 0)] if n_in and n_out else [],
                         (1, 1, 1, 128, 1, 1, 0) if inline else None)
    compile("\n".join(source), "<generated call>", "exec")


def test_two_outputs_come_back_as_a_tuple_from_the_generated_call(monkeypatch):
    launcher, launches, _ = _with_recorded_driver(monkeypatch, _launcher(outputs=2))
    a, b, o1, o2 = (_cupy_array(0x10000 * i) for i in range(1, 5))
    assert launcher(a, b, out=(o1, o2)) == (o1, o2) and launches[-1][0] == 0x1234
    assert _slot_words(launcher, 4) == [0x10000, 0x20000, 0x30000, 0x40000]
    with pytest.raises(PortableLaunchError, match="output 0 of k overlaps output 1"):
        launcher(a, b, out=(o1, o1))
    with pytest.raises(PortableLaunchError, match="expected 2 output arrays, got 1"):
        launcher(a, b, out=(o1,))
    assert len(launches) == 1


def _launched_words(argv: int, count: int) -> list[int]:
    """The first word of each of `count` parameter slots a launch's kernelParams point at."""
    import ctypes

    slots = (ctypes.c_uint64 * count).from_address(argv)
    return [ctypes.c_uint64.from_address(slots[i]).value for i in range(count)]


def test_tma_parameters_are_encoded_again_only_when_a_pointer_changes(monkeypatch):
    """A kernel with TMA descriptors: launches on pointers seen before reuse their full
    parameter block (a loop of calls, or a model's layers taking turns); new pointers encode
    into a fresh block; the least recently used block goes once too many are kept."""
    from types import SimpleNamespace

    from mgpu_lab.runtime import portable

    spec = {"name": "k", "grid": [1, 1, 1], "block": [128, 1, 1], "cluster": [1, 1, 1], "dynamic_smem": 0,
            "inputs": [([16], "float32")], "outputs": [([16], "float32")],
            "params": [("array", 0), ("array", 1), ("tma", 0)], "cubin": b"", "profile_words": None}
    encoded = []

    def encode(index, arrays):
        encoded.append(arrays[0])
        return np.full(16, arrays[0] + 1, dtype=np.uint64)

    launcher = PortableLauncher(spec, tma_encoder=SimpleNamespace(encode=encode))
    launched = []
    launcher._functions[0] = SimpleNamespace(launch=lambda stream, argv: launched.append(_launched_words(argv, 3)))
    for _ in range(3):
        launcher.launch_pointers([0x10000, 0x20000], 0, 5)
    assert encoded == [0x10000] and launched == [[0x10000, 0x20000, 0x10001]] * 3
    launcher.launch_pointers([0x40000, 0x20000], 0, 5)
    assert encoded == [0x10000, 0x40000] and launched[-1] == [0x40000, 0x20000, 0x40001]
    launcher.launch_pointers([0x10000, 0x50000], 0, 5)  # the output alone changed: its slot too
    assert launched[-1] == [0x10000, 0x50000, 0x10001]
    launcher.launch_pointers([0x40000, 0x20000], 0, 5)  # a pointer set seen before: nothing encoded
    assert len(encoded) == 3 and launched[-1] == [0x40000, 0x20000, 0x40001]
    for i in range(portable._FILLED_BLOCKS):  # as many new sets as are kept: the oldest are dropped
        launcher.launch_pointers([0x100000 * (i + 1), 0x20000], 0, 5)
    encoded.clear()
    launcher.launch_pointers([0x40000, 0x20000], 0, 5)
    assert encoded == [0x40000] and launched[-1] == [0x40000, 0x20000, 0x40001]


def test_a_failed_encode_leaves_no_block_for_its_pointers(monkeypatch):
    """An encode that raises (a misaligned address) must not leave a half-filled block that a
    later launch on the same pointers would run with."""
    from types import SimpleNamespace

    spec = {"name": "k", "grid": [1, 1, 1], "block": [128, 1, 1], "cluster": [1, 1, 1], "dynamic_smem": 0,
            "inputs": [([16], "float32")], "outputs": [([16], "float32")],
            "params": [("array", 0), ("tma", 0), ("tma", 1)], "cubin": b"", "profile_words": None}
    fail = [True]

    def encode(index, arrays):
        if index == 1 and fail[0]:
            raise ValueError("array 1: TMA needs a 16-byte aligned base address")
        return np.full(16, arrays[index] + 1, dtype=np.uint64)

    launcher = PortableLauncher(spec, tma_encoder=SimpleNamespace(encode=encode))
    launched = []
    launcher._functions[0] = SimpleNamespace(launch=lambda stream, argv: launched.append(_launched_words(argv, 3)))
    with pytest.raises(ValueError, match="16-byte aligned"):
        launcher.launch_pointers([0x10000, 0x20000], 0, 5)
    assert launched == [] and not launcher._storage.filled
    fail[0] = False
    launcher.launch_pointers([0x10000, 0x20000], 0, 5)
    assert launched == [[0x10000, 0x10001, 0x20001]]


def test_a_kernel_call_becomes_one_generated_function_once_its_module_is_loaded(monkeypatch):
    """After the first call loads the module, `kernel(...)` is the generated checks and launch
    (`front_call`); an isolate request, the isolation switch, a mismatch to explain or setting
    `kernel.isolate` go back to the general call."""
    import inspect
    import traceback

    from mgpu_lab.errors import LaunchArgumentError
    from mgpu_lab.examples.vector_add import make_vector_add
    from mgpu_lab.runtime import isolation

    kernel = make_vector_add(16)
    single = kernel.launcher.single
    single._get_device = single._raw_get_device = kernel.launcher.checker._get_device = lambda: 0
    _, launches, _ = _with_recorded_driver(monkeypatch, single)
    assert kernel._call == kernel._call_general
    a, b, out = _cupy_array(0x10000), _cupy_array(0x20000), _cupy_array(0x30000)
    assert kernel(a, b, out=out) is out and len(launches) == 1
    front = kernel._call
    assert front != kernel._call_general and front.__code__.co_filename.endswith("portable.py:generated call")
    assert kernel(a, b, out=out) is out and len(launches) == 2 and kernel._call is front
    assert [launch[9] for launch in launches] == [single._storage.argv_address] * 2
    with pytest.raises(LaunchArgumentError, match=r"input 1 of vector_add: expected shape \(16,\), got \(8,\)") as caught:
        kernel(a, _cupy_array(0x20000, shape=(8,)), out=out)
    frames = [frame.filename for frame in traceback.extract_tb(caught.value.__traceback__)]
    assert frames and all(name == __file__ for name in frames), frames  # the user's line only
    general = []
    monkeypatch.setattr(kernel, "_call_isolated", lambda *args: general.append(args[1:3]) or "isolated")
    assert kernel(a, b, out=out, isolate=True) == "isolated"
    monkeypatch.setattr(isolation.SETTINGS, "enabled", True)
    assert kernel(a, b, out=out) == "isolated" and len(general) == 2 and len(launches) == 2
    monkeypatch.setattr(isolation.SETTINGS, "enabled", False)
    kernel.isolate = True
    assert kernel._call == kernel._call_general and kernel(a, b, out=out) == "isolated"
    assert list(inspect.signature(kernel).parameters) == ["args", "out", "stream", "isolate", "timeout_s"]
    assert "program" in inspect.signature(type(kernel)).parameters  # the class keeps its constructor's


def test_a_kernel_calls_what_it_installed_pickles_and_stays_itself_as_a_class_attribute():
    """The call dispatches (in C) to the installed function; pickling carries the program and
    the isolation choice; a Kernel kept on a class is not bound to the instance like a method."""
    import pickle

    from mgpu_lab.examples.vector_add import make_vector_add

    kernel = make_vector_add(16, isolate=False)
    seen = []
    kernel._install_call(lambda *args, **kwargs: seen.append((args, kwargs)) or "spied")
    assert kernel(1, 2, out=3) == "spied" and seen == [((1, 2), {"out": 3})]
    copy = pickle.loads(pickle.dumps(kernel))
    assert type(copy) is type(kernel) and copy.name == kernel.name and copy.isolate is False
    assert copy.program.to_dict() == kernel.program.to_dict() and copy._call == copy._call_general

    class Model:
        gemm = kernel

    assert Model().gemm is kernel and Model.gemm is kernel
