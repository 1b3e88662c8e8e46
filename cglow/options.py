"""Options that shape the generated C API and memory plan."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import CglowError


@dataclass(frozen=True)
class Options:
    align: int = 16              # bytes: every buffer in the arena starts at a multiple (NET_ARENA_ALIGN)
    caller_arena: bool = False   # net_run(void *arena, ...): the caller owns the arena, no static array
    io_in_arena: bool = False    # inputs and outputs live in the arena too: RAM is the arena alone

    def __post_init__(self):
        if self.align < 1 or self.align & (self.align - 1) or self.align > 4096:
            raise CglowError(f"--align {self.align}: must be a power of two from 1 to 4096")
