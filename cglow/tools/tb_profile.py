"""The executed path of an emulated image, as the QEMU plugin cglow/tools/qemu/tb_profile.c records it: per
interval between marks, how often each translated block ran after each other block.

A block is named by its first instruction's address and its number of instructions. Interval k is the
code run after the k-th start of the marker function (the harness, cglow/tools/templates/baremetal.c.j2, marks
twice before each net_run and once after): EMPTY_CALL is the code between two back-to-back marks, CALL the
code across the first net_run call, so CALL less EMPTY_CALL is that call's own."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

EMPTY_CALL, CALL = 1, 2


@dataclass(frozen=True)
class Block:
    address: int          # of its first instruction (without the Thumb bit)
    instructions: int


START = Block(0, 0)       # the "previous block" of the first block the guest runs


@dataclass(frozen=True)
class Profile:
    pairs: dict[int, dict[tuple[Block, Block], int]]  # interval -> (previous block, block) -> times
    mark: int                                         # the marker function's address

    @property
    def intervals(self) -> int:
        return max(self.pairs, default=-1) + 1

    def instructions(self, interval: int) -> int:
        """The instructions executed in the interval."""
        return sum(block.instructions * n for (_, block), n in self.pairs.get(interval, {}).items())

    @classmethod
    def parse(cls, text: str, mark: int) -> Profile:
        """A profile from the plugin's output: lines of interval, previous block, block, count."""
        pairs: dict[int, dict[tuple[Block, Block], int]] = defaultdict(dict)
        for line in text.splitlines():
            interval, prev_address, prev_insns, address, insns, count = map(int, line.split())
            pairs[interval][Block(prev_address, prev_insns), Block(address, insns)] = count
        return cls(dict(pairs), mark)
