"""Marks TMA descriptor parameters byval + `nvvm.grid_constant` after the GPU-to-NVVM lowering.

The builder lists the descriptor parameters of a kernel in the TMA_PARAMS_ATTR attribute of its
gpu.func; convert-gpu-to-nvvm copies only a fixed list of argument attributes (and the NVVM
verifier accepts `nvvm.grid_constant` on llvm.func kernels only), so the pipeline runs this
right after that pass. The result in PTX: `.param .align 64 .b8 name[128]`, read in place.
"""

from __future__ import annotations

from typing import Any

from .._mlir import ir

TMA_PARAMS_ATTR = "mgpu_lab.tma_params"
DESCRIPTOR_BYTES = 128
DESCRIPTOR_ALIGN = 64


def mark_descriptor_params(module: ir.Module) -> None:
    """After convert-gpu-to-nvvm: mark descriptor arguments byval + grid_constant + align 64.

    convert-gpu-to-nvvm copies only a fixed list of argument attributes (and the NVVM verifier
    accepts `nvvm.grid_constant` on llvm.func kernels only), so they are set here."""
    param = ir.DictAttr.get({
        "llvm.byval": ir.TypeAttr.get(ir.Type.parse(f"!llvm.array<{DESCRIPTOR_BYTES} x i8>")),
        "nvvm.grid_constant": ir.UnitAttr.get(),
        "llvm.align": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), DESCRIPTOR_ALIGN),
    })

    def visit(op: Any) -> None:
        for region in op.regions:
            for block in region.blocks:
                for child in block.operations:
                    child = child.operation
                    if child.name == "llvm.func" and TMA_PARAMS_ATTR in child.attributes:
                        _mark(child, param)
                    elif child.name in ("gpu.module", "builtin.module"):
                        visit(child)

    visit(module.operation)


def _mark(func: Any, param: ir.DictAttr) -> None:
    indices = set(ir.DenseI32ArrayAttr(func.attributes[TMA_PARAMS_ATTR]))
    count = len(func.regions[0].blocks[0].arguments)
    old = list(func.attributes["arg_attrs"]) if "arg_attrs" in func.attributes else \
        [ir.DictAttr.get({})] * count
    func.attributes["arg_attrs"] = ir.ArrayAttr.get([param if i in indices else old[i] for i in range(count)])
