"""The exported module launches exactly like the in-package launcher, checked byte for byte on the CPU.

cuTensorMapEncodeTiled needs a driver, so it is replaced by a recorder that returns words derived
from its arguments: both launchers must pass the encoder the same arguments and write the same
128-byte parameter slots (pointers, descriptors) in the same order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import sys
import types

import numpy as np
import pytest
from cupy_stand_in import DeviceArray, install

import mgpu_lab
from mgpu_lab.examples.scaled_add import make_scaled_add
from mgpu_lab.examples.vector_add import make_vector_add


def _plain(value):
    """cuda-bindings values as plain ints (enums, cuuint64_t), lists element-wise."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    try:
        return int(value)
    except TypeError:
        return int(getattr(value, "value", value)) if hasattr(value, "value") else repr(value)


@pytest.fixture
def encoder_calls(monkeypatch):
    """Replace cuTensorMapEncodeTiled: record its arguments, return 16 words hashed from them."""
    from cuda.bindings import driver

    calls = []

    def encode(*args):
        plain = _plain(list(args))
        calls.append(plain)
        digest = hashlib.sha512(repr(plain).encode()).digest() * 2
        return driver.CUresult.CUDA_SUCCESS, types.SimpleNamespace(opaque=list(np.frombuffer(digest, np.uint64)))

    monkeypatch.setattr(driver, "cuTensorMapEncodeTiled", encode)
    return calls


def _exported(kernel, tmp_path, monkeypatch, name):
    path = kernel.export(tmp_path / f"{name}.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return importlib.import_module(name)


def _launch_both(kernel, tmp_path, monkeypatch, name, args, out):
    ours = install(monkeypatch)
    mgpu_lab.Kernel(kernel.compiled)(*args, out=out)
    module = _exported(kernel, tmp_path, monkeypatch, name)
    theirs = install(monkeypatch, portable_module=module)
    getattr(module, kernel.compiled.name)(*args, out=out)
    [a], [b] = ours.launches, theirs.launches
    return a, b


def test_tma_descriptors_and_parameters_match_byte_for_byte(tmp_path, monkeypatch, encoder_calls):
    k = make_scaled_add(64, 512, tile=(32, 256))
    assert k.compiled.tma_descriptors, "scaled_add should use TMA"
    x, y = DeviceArray((64, 512), "float32"), DeviceArray((64, 512), "float32")
    ours, theirs = _launch_both(k, tmp_path, monkeypatch, "scaled_add_export", (x,), y)
    assert ours.params and ours.params == theirs.params
    assert (ours.grid, ours.block) == (theirs.grid, theirs.block) == ((2, 2, 1), (128, 1, 1))
    n = len(k.compiled.tma_descriptors)
    assert len(encoder_calls) == 2 * n and encoder_calls[:n] == encoder_calls[n:]
    # The encoder saw each descriptor's array, shape, strides, box and swizzle.
    for call, spec in zip(encoder_calls[:n], k.compiled.tma_descriptors, strict=True):
        dtype, rank, ptr, shape, strides, box, elem, _, swizzle, _, _ = call
        assert ptr == (x.ptr, y.ptr)[spec.array]
        assert (rank, shape, strides, box) == (len(spec.global_shape), list(spec.global_shape),
                                               list(spec.global_strides_bytes), list(spec.box_shape))
        assert elem == [1] * rank
    # Slot layout: a TMA slot holds the 16 descriptor words, an array slot its pointer.
    words = {i: np.frombuffer(p, np.uint64) for i, p in enumerate(ours.params)}
    for slot, param in enumerate(k.compiled.params):
        if param.kind == "array":
            assert words[slot][0] == (x.ptr, y.ptr)[param.index]
        elif param.kind == "tma":
            digest = hashlib.sha512(repr(encoder_calls[param.index]).encode()).digest() * 2
            assert words[slot].tobytes() == digest


def test_pointer_kernels_pass_the_same_pointers(tmp_path, monkeypatch):
    k = make_vector_add(1 << 10)
    a, b, out = (DeviceArray((1 << 10,), "float32") for _ in range(3))
    ours, theirs = _launch_both(k, tmp_path, monkeypatch, "vadd_export_ptrs", (a, b), out)
    assert ours.params == theirs.params and ours.pointers == [a.ptr, b.ptr, out.ptr]
    assert (ours.grid, ours.block, ours.smem) == (theirs.grid, theirs.block, theirs.smem)


def test_exported_argument_errors_match_the_package(tmp_path, monkeypatch):
    k = make_vector_add(1 << 10)
    install(monkeypatch)
    module = _exported(k, tmp_path, monkeypatch, "vadd_export_errors")
    install(monkeypatch, portable_module=module)
    bad = DeviceArray((1 << 10,), "float64")
    with pytest.raises(module.LaunchArgumentError) as theirs:
        module.vector_add(bad, bad)
    with pytest.raises(mgpu_lab.errors.LaunchArgumentError) as ours:
        mgpu_lab.Kernel(k.compiled)(bad, bad)
    assert str(theirs.value) == str(ours.value)
    assert "input 0 of vector_add: expected dtype float32" in str(ours.value)


def test_the_exported_module_docstring_describes_the_kernel():
    import ast

    from mgpu_lab import __version__
    from mgpu_lab.runtime.export import export_source

    compiled = make_vector_add(1 << 10).compiled
    doc = ast.get_docstring(ast.parse(export_source(compiled, "my_vadd")), clean=False)
    assert doc.splitlines()[:10] == [
        f"vector_add: a Hopper kernel exported by mgpu_lab {__version__} ('sm_90a'; 'vector_add' grid (1, 1, 1) "
        f"block (256, 1, 1)).",
        "",
        "    import my_vadd",
        "    out = my_vadd.vector_add(*inputs)          # CuPy arrays or torch tensors (or DLPack / CUDA array interface)",
        '    op = my_vadd.as_torch_op("ns::vector_add")  # the same as a torch custom op (needs torch)',
        "",
        "Inputs: (1024,) 'float32', (1024,) 'float32'",
        "Outputs: (1024,) 'float32'",
        "Scratch (allocated by the module, per device and stream): none",
        "Needs numpy, cupy and cuda-bindings; as_torch_op needs torch. Generated file: do not edit.",
    ]


def test_a_kernel_without_inputs_says_so_in_the_docstring():
    import ast

    from fault_kernels import N, make_trap

    from mgpu_lab.runtime.export import export_source

    doc = ast.get_docstring(ast.parse(export_source(make_trap().compiled, "trap_mod")), clean=False)
    assert doc.splitlines()[6:8] == ["Inputs: none", f"Outputs: ({N},) 'float32'"]


def test_the_exported_program_is_the_kernels_program(tmp_path, monkeypatch):
    k = make_scaled_add(64, 512, tile=(32, 256))
    install(monkeypatch)
    module = _exported(k, tmp_path, monkeypatch, "scaled_add_spec")
    assert module.PROGRAM == k.program.to_dict() and module.SPEC is module.PROGRAM
    assert module._TMA_DESCRIPTORS == {0: [dataclasses.asdict(d) for d in k.compiled.tma_descriptors]}


@pytest.mark.parametrize("name", ["class", "two-words", "ünïcode"])
def test_kernel_names_that_cannot_be_python_names_are_refused(name):
    from mgpu_lab.errors import ExportError
    from mgpu_lab.runtime.export import export_source

    compiled = make_vector_add(1 << 10).compiled.renamed(name)
    with pytest.raises(ExportError, match="kernel name: expected an ASCII identifier that is not a Python keyword"):
        export_source(compiled, "mod")
