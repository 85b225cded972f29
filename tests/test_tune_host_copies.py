"""The tuner copies its input sets to the host for the worker processes: torch tensors of every
dtype, bfloat16 and float8 included (torch's `.numpy()` refuses those)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype, name", [(torch.bfloat16, "bfloat16"), (torch.float8_e4m3fn, "float8_e4m3fn"),
                                         (torch.float32, "float32")])
def test_torch_tensors_come_to_the_host_bit_for_bit(dtype, name):
    from mgpu_lab.tuning.pipeline import _to_host

    values = torch.tensor([[1.5, -2.25], [0.125, 3.0]]).to(dtype)
    host = _to_host(values)
    assert host.dtype.name == name and host.shape == (2, 2)
    np.testing.assert_array_equal(host.astype(np.float32), values.float().numpy())
