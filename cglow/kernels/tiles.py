"""Register tile sizes per target (`cglow emit --target`): rows x columns of accumulators in the conv and
matrix kernels (output columns x output channels for a channels-last convolution).

Vector targets take 4 x 16: the 16 lanes become one or a few vector registers (measured with `make bench`
on x86-64 with AVX-512: about 100 GFLOP/s per conv kernel). Scalar targets take 4 x 4: 16 accumulators
fit the 32 single-precision registers of a Cortex-M4F next to the operands, where 4 x 16 spills them
(measured with `make bench-mcu`: 4.2-4.9 instructions per multiply-accumulate with 4 x 16, 3.0-3.7 with
4 x 4). The emitted C is the same portable C99 for every target; only these sizes change."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tiles:
    rows: int
    columns: int


VECTOR, SCALAR = Tiles(4, 16), Tiles(4, 4)
TILES = {"generic": VECTOR, "host": VECTOR, "x86-avx2": VECTOR, "x86-avx512": VECTOR, "aarch64": VECTOR,
         "aarch64-linux": VECTOR, "rv64gcv": VECTOR, "cortex-m3": SCALAR, "cortex-m4": SCALAR, "cortex-m7": SCALAR,
         "riscv32": SCALAR, "riscv64": SCALAR, "riscv64-linux": SCALAR}
