"""GPU test of the hand-over pieces (tests/test_dsl_hand_over.py's kernel): block 0 parks a
register tile in global memory by thread and signals; block 1 waits, bulk-copies the bytes into
smem, reads them back by thread and adds its own tile. Run twice: the waiter resets the flag."""

from __future__ import annotations

import numpy as np
import pytest
from test_dsl_hand_over import _hand_over_kernel
from test_hopper import poison

pytestmark = pytest.mark.gpu


def test_a_block_hands_a_tile_to_another(rng):
    import cupy

    k = _hand_over_kernel(mbarrier_timeout_s=5.0)
    x = rng.standard_normal((64, 64)).astype(np.float32)
    work = cupy.full((16 // 2, 128, 4), np.nan, np.float32)
    flags = cupy.zeros((1,), np.int32)
    for _ in range(2):
        out = poison(cupy, (64, 64), "float32")
        k(cupy.asarray(x), work, flags, out=out)
        np.testing.assert_array_equal(out.get(), 2 * x)
        assert int(flags.get()[0]) == 0
