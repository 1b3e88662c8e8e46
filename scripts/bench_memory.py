"""Per zoo model (the ones named on the command line, or all): the naive floor (ONNX node order, one buffer
per node output), cglow's schedule floor, NET_ARENA_BYTES and the RAM a user provides (arena + inputs and
outputs), in bytes and KiB, and the arena and RAM over the naive floor.

Run with `make bench-memory`."""
from __future__ import annotations

import sys

from cglow import zoo
from cglow.memory import analyze_model

COLUMNS = ("naive floor", "schedule floor", "arena", "RAM")


def main() -> None:
    print(f"{'':12}" + "".join(f" {c:>19}" for c in COLUMNS) + f" {'arena/':>7} {'RAM/':>7}")
    print(f"{'model':12}" + f" {'bytes':>10} {'KiB':>8}" * len(COLUMNS) + f" {'naive':>7} {'naive':>7}")
    for name in sys.argv[1:] or list(zoo.MODELS):
        _, _, r = analyze_model(zoo.build(name))
        values = (r.naive_floor, r.schedule_floor, r.arena_bytes, r.ram_bytes)
        print(f"{name:12}" + "".join(f" {v:10} {v / 1024:8.1f}" for v in values) +
              f" {r.arena_bytes / r.naive_floor:7.2f} {r.ram_bytes / r.naive_floor:7.2f}")


if __name__ == "__main__":
    main()
