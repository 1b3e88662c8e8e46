"""Options that shape the generated C API and memory plan."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import CglowError
from .tiles import TARGETS, tiles_for

MAX_MEMORY = 1 << 30  # bytes: the default --max-memory


@dataclass(frozen=True)
class Options:
    align: int = 16                 # bytes: every buffer in the arena (and the weights file) starts at a multiple
    caller_arena: bool = False      # net_run(void *arena, ...): the caller owns the arena, no static array
    io_in_arena: bool = False       # inputs and outputs live in the arena too: RAM is the arena alone
    external_weights: bool = False  # net_run(const void *weights, ...): the weights are a binary file, not in net.c
    target: str = "generic"         # the register tile sizes of the conv and matrix kernels (cglow/tiles.py)
    max_memory: int = MAX_MEMORY    # bytes: refuse a model with a larger tensor, or larger weights + arena + I/O
    float_io: bool = False          # a quantized model keeps float inputs and outputs, (de)quantized in net_run
    max_recompute: float = 0.0      # percent of the MACs a patched span may add recomputing its halos (alloc/patch_plan.py)
    ram_budget: int | None = None   # bytes: the fastest plan whose arena fits, else an error
    narrow_weights: bool = True     # int4, float16 and bfloat16 weights stored as such, unpacked a chunk at a time
    nibble_weights: bool = False    # other 4-bit weights two a byte in flash too, unpacked into the arena
    half_math: str = "float"        # float16 arithmetic in float32, or "native": the target's (instr/half_math.py)
    capacities: tuple[tuple[str, int], ...] = ()  # (NAME, N): output NAME of run-time length stores N entries at most

    def __post_init__(self):
        if self.target not in TARGETS:
            raise CglowError(f"--target {self.target}: unknown; one of {', '.join(TARGETS)}")
        if self.align < 1 or self.align & (self.align - 1) or self.align > 4096:
            raise CglowError(f"--align {self.align}: must be a power of two from 1 to 4096")
        if not 0 <= self.max_recompute <= 1000:
            raise CglowError(f"--max-recompute {self.max_recompute:g}: must be a percentage from 0 to 1000")
        if self.ram_budget is not None and self.ram_budget < 1:
            raise CglowError(f"--ram-budget {self.ram_budget}: must be a positive number of bytes")
        if self.half_math not in ("float", "native"):
            raise CglowError(f"--half-math {self.half_math}: unknown; one of float, native")
        if self.half_math == "native" and not tiles_for(self.target).native_half:
            having = ", ".join(t for t in TARGETS if t != "host" and tiles_for(t).native_half)
            raise CglowError(f"--half-math native: --target {self.target} has no half-precision arithmetic "
                             f"(targets that have it: {having})")
        names = [name for name, _ in self.capacities]
        for name, n in self.capacities:
            if n < 1:
                raise CglowError(f"--capacity {name}={n}: must be a positive number of entries")
            if names.count(name) > 1:
                raise CglowError(f"--capacity {name}: given more than once")
        if self.max_memory < 1:
            raise CglowError(f"--max-memory {self.max_memory}: must be a positive number of bytes")
