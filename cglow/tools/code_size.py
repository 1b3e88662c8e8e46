"""An estimate of the machine code a generated C file compiles to (flash besides the weights), without a
compiler: its C statements times the bytes a statement takes, measured on the zoo models.

Counted: every statement, `for` and `if` of the file's functions (the kernels, the helpers and net_run: one
call per kernel; identical kernels are written once, cglow.emit_c.emit); on a scalar target (Tiles.scalar:
Cortex-M, RISC-V without vectors) a register-tile loop (CGLOW_TILE_LOOP) is unrolled, so its body counts once
per iteration. Bytes per statement: the median over
nine zoo models of the compiled object's text over its statements, 9 for scalar targets (--target cortex-m4,
arm-none-eabi-gcc 12 -O2 for Cortex-M4F: 7.1 to 12.7 per model) and 17 for the others (--target generic,
gcc 12 -O2 on x86-64: 14.9 to 28.6); the estimate was 0.6 to 1.3 times the measured size on those models.
The C library's functions are not counted."""
from __future__ import annotations

from dataclasses import dataclass
import re

from ..kernels.code_size import BYTES_PER_STATEMENT, statements
from ..tiles import tiles_for

FUNCTION_BODY = re.compile(r"^\{\n(.*?)^\}$", re.S | re.M)


@dataclass(frozen=True)
class CodeSize:
    statements: int
    bytes_per_statement: int

    @property
    def estimate(self) -> int:
        return self.statements * self.bytes_per_statement


def code_size(c_source: str, target: str) -> CodeSize:
    """The statements of the file's function bodies and the bytes per statement of the target."""
    scalar = tiles_for(target).scalar
    bodies = FUNCTION_BODY.findall(c_source)
    return CodeSize(sum(statements(body, scalar) for body in bodies), BYTES_PER_STATEMENT[scalar])
