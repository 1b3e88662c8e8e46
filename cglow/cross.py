"""Build a compiled model for a cross target (cglow.targets) and run it under the target's emulator.

build_image links the generated C with the bare-metal harness (cglow.emit_c.harness.baremetal_source:
embedded inputs, one net_run, outputs written as hex bit patterns) using the target's compiler, the strict
warning flags and the target's machine and link flags; images are cached by a hash like host builds.
run_image runs one under the emulator with a timeout, parses the outputs back into arrays, bit-exact, and
with `count` loads a QEMU TCG plugin (cglow/qemu/insn_count.c, built with the host compiler into the
cache) that counts the instructions executed between the harness's marks: the net_run call's count is
the count across it minus the count between two back-to-back marks. That number is exact and the same on
every run. soft_double_helpers lists the libgcc software double-precision routines an image links."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
import re
import subprocess
import tempfile

import numpy as np

from .compiler import CompiledModel
from .emit_c.harness import baremetal_source, parse_output_bits
from .host import STRICT_FLAGS, build_cached, sources
from .targets import Target

OPT_FLAGS = ("-O2",)
# libgcc's software double-precision helpers: the Arm EABI names (__aeabi_dadd, __aeabi_f2d ...) and the
# generic DFmode ones (__adddf3, __extendsfdf2, __truncdfsf2, __fixdfsi, __floatsidf ...)
SOFT_DOUBLE = re.compile(r"^__aeabi_(d[a-z0-9]+|[a-z0-9]+2d)$"
                         r"|^__([a-z]*df[a-z]*[0-9]|fix(uns)?df[sdt]i|float(un)?[sdt]idf)$")


@dataclass(frozen=True)
class Run:
    outputs: list[np.ndarray]
    instructions: int | None       # executed by the net_run call (None when not counted)
    stdout: str = ""               # what the image printed


def build_image(compiled: CompiledModel, inputs: list[np.ndarray], target: Target, opt=OPT_FLAGS,
                traced: str = "") -> Path:
    """The model and the bare-metal harness on `inputs`, linked for `target` (cached); the image's path. With
    `traced`, the model's C with tracing (cglow.trace), and the harness that prints what it hands over."""
    files = {**sources(compiled), f"{compiled.name}_main.c": baremetal_source(compiled, inputs, bool(traced))}
    if traced:
        files[f"{compiled.name}.c"] = traced
    flags = (*opt, *STRICT_FLAGS, *target.cflags, *target.ldflags)
    return build_cached(files, target.cc, flags, f"{target.name}-{{}}.elf", quiet=True)


def symbols(image: Path, target: Target) -> dict[str, int]:
    """The image's symbols and their addresses, from the target's nm."""
    out = subprocess.run([f"{target.binutils}nm", str(image)], capture_output=True, text=True, check=True).stdout
    return {fields[2]: int(fields[0], 16) for fields in map(str.split, out.splitlines()) if len(fields) == 3}


def image_size(image: Path, target: Target) -> tuple[int, int, int]:
    """The image's text (code and constants), data and bss bytes, from the target's size."""
    out = subprocess.run([f"{target.binutils}size", str(image)], capture_output=True, text=True, check=True).stdout
    text, data, bss = (int(v) for v in out.splitlines()[1].split()[:3])
    return text, data, bss


def soft_double_helpers(image: Path, target: Target) -> list[str]:
    """The software double-precision routines the image links (none should, in a float model's image on a
    target without double-precision hardware: Target.soft_double)."""
    return sorted(name for name in symbols(image, target) if SOFT_DOUBLE.match(name))


@lru_cache(maxsize=None)
def insn_count_plugin(cc: str = "cc") -> Path:
    """The instruction-counting QEMU plugin, built with the host compiler into the cache."""
    source = (resources.files("cglow") / "qemu" / "insn_count.c").read_text()
    return build_cached({"insn_count.c": source}, cc, ("-O2", *STRICT_FLAGS, "-shared", "-fPIC"),
                        "qemu-insn-count-{}.so", quiet=True)


def run_image(image: Path, compiled: CompiledModel, target: Target, count: bool = True,
              timeout: float = 600.0) -> Run:
    """Run an image from build_image under the target's emulator: its outputs and, with `count`, the
    instructions its net_run call executed."""
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp, "marks")
        plugin = ""
        if count:
            mark = symbols(image, target)["insn_mark"] & ~1  # the Thumb bit is not part of the address
            plugin = f"{insn_count_plugin()},mark={mark:#x},out={records}"
        command = target.command(str(image), plugin)
        try:
            result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
                                    timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{image.name} did not finish under {command[0]} within {timeout:g} s") from None
        if result.returncode:
            raise RuntimeError(f"{image.name} under {command[0]} exited with {result.returncode}: "
                               f"{(result.stdout + result.stderr)[-500:]}")
        outputs = parse_output_bits(result.stdout, compiled)
        if not count:
            return Run(outputs, None, result.stdout)
        marks = [int(v) for v in records.read_text().split()]
    if len(marks) != 3:
        raise RuntimeError(f"expected 3 instruction-count marks from {image.name}, got {len(marks)}")
    first, before, after = marks
    return Run(outputs, (after - before) - (before - first), result.stdout)
