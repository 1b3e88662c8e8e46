"""Per zoo model (the ones named on the command line, or all): the naive floor (ONNX node order, one buffer
per node output), cglow's schedule floor, NET_ARENA_BYTES, the RAM a user provides (arena + inputs and
outputs), and that RAM when the inputs and outputs live in the arena (--io-in-arena: RAM is then the
arena alone), in bytes and KiB, and each over the naive floor.

Run with `make bench-memory`."""
from __future__ import annotations

import sys

from cglow import zoo
from cglow.tools.memory import analyze_model
from cglow.options import Options

COLUMNS = ("naive floor", "schedule floor", "arena", "RAM", "RAM, I/O in arena")


def main() -> None:
    print(f"{'':12}" + "".join(f" {c:>19}" for c in COLUMNS) + f" {'arena/':>7} {'RAM/':>7} {'RAM io/':>8}")
    print(f"{'model':12}" + f" {'bytes':>10} {'KiB':>8}" * len(COLUMNS) + f" {'naive':>7} {'naive':>7} {'naive':>8}")
    for name in sys.argv[1:] or list(zoo.MODELS):
        model = zoo.build(name)
        _, r = analyze_model(model)
        _, io = analyze_model(model, options=Options(io_in_arena=True))
        values = (r.naive_floor, r.schedule_floor, r.arena_bytes, r.ram_bytes, io.ram_bytes)
        print(f"{name:12}" + "".join(f" {v:10} {v / 1024:8.1f}" for v in values) +
              f" {r.arena_bytes / r.naive_floor:7.2f} {r.ram_bytes / r.naive_floor:7.2f}"
              f" {io.ram_bytes / r.naive_floor:8.2f}")


if __name__ == "__main__":
    main()
