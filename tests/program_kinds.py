"""Every kind of Kernel the library builds, small: what the export tests (CPU: the exported
program is the in-process one; GPU: the exported module gives the same bits) walk through."""

from __future__ import annotations

import functools
from collections.abc import Callable

from mgpu_lab.kernels.attention import make_attention
from mgpu_lab.kernels.gemm import fused, make_fp8_block_scaled_gemm, make_fp8_gemm, make_gemm


def _fused_gemm():
    m, n, k = 256, 512, 384
    epilogue = fused(m, n, bias="bfloat16", activation="gelu", residual="bfloat16")
    return make_gemm(m, n, k, tile_m=128, tile_n=128, epilogue=epilogue, epilogue_inputs=epilogue.inputs)


KINDS: dict[str, Callable] = {
    "plain": functools.partial(make_gemm, 256, 512, 384, tile_m=128, tile_n=128),
    "persistent": functools.partial(make_gemm, 1024, 1024, 512, tile_m=128, tile_n=256, persistent=True),
    "pingpong": functools.partial(make_gemm, 1024, 1024, 512, tile_m=128, tile_n=128, persistent="pingpong"),
    "stream_k": functools.partial(make_gemm, 1024, 1024, 1024, tile_m=128, tile_n=256, persistent="stream_k"),
    "cluster_m2": functools.partial(make_gemm, 1024, 1024, 512, tile_m=128, tile_n=256, persistent=True,
                                    cluster_m=2),
    "split_k_cluster": functools.partial(make_gemm, 64, 1024, 4096, transpose_b=True, tile_m=64, tile_n=128,
                                         split_k=4),
    "split_k_workspace": functools.partial(make_gemm, 512, 512, 16384, split_k=16, split_k_reduce="workspace"),
    "swap_ab": functools.partial(make_gemm, 129, 1024, 1032, transpose_b=True, tile_m=128, tile_n=144,
                                 swap_ab=True),
    "swap_ab_b_k_n": functools.partial(make_gemm, 129, 1024, 1032, tile_m=128, tile_n=144, swap_ab=True),
    "padded": functools.partial(make_gemm, 129, 257, 72),
    "padded_split_k_workspace": functools.partial(make_gemm, 129, 257, 1000, tile_m=64, tile_n=64, split_k=3,
                                                  split_k_reduce="workspace"),
    "fused_epilogue": _fused_gemm,
    "fp8": functools.partial(make_fp8_gemm, 256, 512, 512, tile_m=128, tile_n=128),
    "fp8_stream_k": functools.partial(make_fp8_gemm, 1024, 1024, 1024, tile_m=128, tile_n=256,
                                      persistent="stream_k"),
    "fp8_block_scaled": functools.partial(make_fp8_block_scaled_gemm, 256, 512, 512),
    "attention": functools.partial(make_attention, 1, 2, 256, 256, 64),
}


@functools.cache
def build(kind: str):
    return KINDS[kind]()
