"""The compiler matrix: a model's C built with each compiler and optimization level its users pick, and run on
the same inputs. On the host, gcc -O1 -O2 -O3 -Os and clang -O2 -O3 with the strict flags (no -march, so every
x86-64 machine alike); for the Cortex-M4, arm-none-eabi-gcc -O2 -Os under QEMU. Every setting must agree with the
reference runtime within the tolerance, and bit for bit with the other levels of its compiler: no -ffast-math,
and the same contraction of a * b + c at every level (none for gcc under -std=c99; clang contracts by default,
when it folds constants too, so gcc and clang agree within the tolerance only)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..compiler import CompiledModel
from .check import host_outputs, target_outputs

TOLERANCE = 1e-5  # of each output's scale (cglow.tools.reference.scale_of)


@dataclass(frozen=True)
class Setting:
    cc: str
    opt: str
    target: str = ""  # a cross target of cglow.tools.targets, or the host

    @property
    def label(self) -> str:
        return f"{self.cc} {self.opt}"


HOST = tuple(Setting("gcc", opt) for opt in ("-O1", "-O2", "-O3", "-Os")) + \
    tuple(Setting("clang", opt) for opt in ("-O2", "-O3"))
CROSS = tuple(Setting("arm-none-eabi-gcc", opt, "cortex-m4") for opt in ("-O2", "-Os"))


def bitwise_alike(a: Setting, b: Setting) -> bool:
    """Whether two settings must give the same bits: one compiler for one target."""
    return a.target == b.target and a.cc == b.cc


def outputs(compiled: CompiledModel, inputs: list[np.ndarray], setting: Setting) -> list[np.ndarray]:
    """The model's outputs with the C built under `setting` (compiled for its target's tiles)."""
    if setting.target:
        return target_outputs(compiled, [inputs], setting.target, (setting.opt,))[1][0]
    return host_outputs(compiled, [inputs], setting.cc, (setting.opt,))[1][0]


def same_bits(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))
