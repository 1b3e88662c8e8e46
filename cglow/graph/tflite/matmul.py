"""BATCH_MATMUL: products of the matrices in the last two axes, the axes before them broadcast. A float32 one
is an ONNX MatMul; an 8-bit one is cglow's IntGemm with TFLite's arithmetic: the int32 sum of (a - a's zero
point) x (b - b's zero point), times one fixed-point multiplier (rounding "tflite"), clamped to the type."""
from __future__ import annotations

import numpy as np

from ...errors import CglowError
from ..ir import TensorType
from .arith import quantize_multipliers
from .build import Build, translator
from .elementwise import one_scale


def _operand(b: Build, i: int, adjoint: bool) -> str:
    """Input i, its last two axes swapped when the option asks for its adjoint."""
    value = b.value(i)
    rank = len(b.tensor(i).shape)
    if rank < 2:
        raise CglowError(f"{b.op.describe()}: input {i} has rank {rank}; BATCH_MATMUL takes matrices")
    if not adjoint:
        return value
    return b.transpose(value, tuple(range(rank - 2)) + (rank - 1, rank - 2))


@translator("BATCH_MATMUL")
def _batch_matmul(b: Build, op) -> None:
    lhs, rhs = _operand(b, 0, bool(b.option("AdjX"))), _operand(b, 1, bool(b.option("AdjY")))
    if not b.quantized():
        return b.finish(b.add("MatMul", [lhs, rhs]))
    if b.tensor(0).dtype != b.tensor(1).dtype:
        raise CglowError(f"{op.describe()}: 8-bit inputs of two types ({b.tensor(0).dtype.name}, "
                         f"{b.tensor(1).dtype.name}) are not supported")
    (sa, za), (sb, zb), (sy, zy) = one_scale(b, 0), one_scale(b, 1), one_scale(b, -1)
    n = b.types[rhs].shape[-1]
    # GetQuantizedConvolutionMultipler: the float product of the input scales, over the output's in double
    real = float(np.float64(np.float32(sa) * np.float32(sb)) / np.float64(sy))
    mult, shift = quantize_multipliers(np.full(n, real))
    info = np.iinfo(b.tensor(-1).dtype)
    attrs = {"a_zero": za, "b_zero": zb, "mult": mult, "shift": shift, "y_zero": zy, "lo": int(info.min),
             "hi": int(info.max), "rounding": "tflite"}
    (*batch_a, m, k), (*batch_b, k_b, _) = b.types[lhs].shape, b.types[rhs].shape
    try:
        batch = np.broadcast_shapes(tuple(batch_a), tuple(batch_b))
    except ValueError:
        batch = None
    if k != k_b or batch is None:
        raise CglowError(f"{op.describe()}: cannot multiply {list(b.types[lhs].shape)} by {list(b.types[rhs].shape)}")
    b.finish(b.add("IntGemm", [lhs, rhs, b.const("bias", np.zeros(n, np.int32))], attrs,
                   out_type=TensorType(b.tensor(-1).dtype, batch + (m, n))))
