"""The torch-op entry point's checks that need no GPU and no torch."""

from __future__ import annotations

import re

import pytest

from mgpu_lab.examples.vector_add import make_vector_add
from mgpu_lab.runtime.export import export_source
from mgpu_lab.runtime.torch_op import TorchOpError, _schema


@pytest.mark.parametrize("bad", ["add", "mylib:add", "my lib::add", "mylib::add(x)", "::add", "mylib::", 3])
def test_qualname_must_be_namespace_colon_colon_name(bad):
    k = make_vector_add(1024)
    with pytest.raises(TorchOpError, match=r"qualname: expected 'namespace::name' .*got " + re.escape(repr(bad))):
        k.as_torch_op(bad)


def test_schema_lists_one_tensor_per_input_and_output():
    assert _schema(2, 1) == "(Tensor x0, Tensor x1) -> Tensor"
    assert _schema(1, 2) == "(Tensor x0) -> (Tensor, Tensor)"


def test_exported_module_offers_as_torch_op_without_importing_torch_at_load():
    source = export_source(make_vector_add(1024).compiled, "shipped")
    assert "def as_torch_op(qualname):" in source and '"as_torch_op"' in source
    namespace: dict = {}
    exec(compile(source, "shipped.py", "exec"), namespace)  # loads with numpy and cupy only
    assert callable(namespace["as_torch_op"])
    # torch is imported inside register_torch_op only, so the module loads where torch is absent.
    assert "import torch" not in source.split("def register_torch_op")[0]
