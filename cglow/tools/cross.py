"""Build a compiled model for a cross target (cglow.tools.targets) and run it under the target's emulator.

build_image links the generated C with the bare-metal harness (cglow.tools.harness.baremetal_source:
embedded inputs, one net_run or a sequence of them with the state kept between them and net_reset where asked,
outputs written as hex bit patterns) using the target's compiler, the strict warning flags and the target's
machine and link flags; images are cached by a hash like host builds. run_image runs one under the emulator
with a timeout (one start for the whole sequence), parses every invocation's outputs back into arrays,
bit-exact, and with `count` loads a QEMU TCG plugin (cglow/tools/qemu/tb_profile.c, built with the host compiler
into the cache) that records the executed path between the harness's marks (cglow.tools.tb_profile). The first
net_run call's instructions are those across it minus those between two back-to-back marks: exact and the
same on every run; cglow.tools.m4_cycles estimates the call's Cortex-M4 cycles from the same path.
soft_double_helpers lists the libgcc software double-precision routines an image links."""
from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
import re
import subprocess
import tempfile

import numpy as np

from ..compiler import CompiledModel
from .harness import baremetal_source, parse_output_bits
from .host import STRICT_FLAGS, build_cached, sources
from .targets import Target
from .tb_profile import CALL, EMPTY_CALL, Profile

OPT_FLAGS = ("-O2",)
# libgcc's software double-precision helpers: the Arm EABI names (__aeabi_dadd, __aeabi_f2d ...) and the
# generic DFmode ones (__adddf3, __extendsfdf2, __truncdfsf2, __fixdfsi, __floatsidf ...)
SOFT_DOUBLE = re.compile(r"^__aeabi_(d[a-z0-9]+|[a-z0-9]+2d)$"
                         r"|^__([a-z]*df[a-z]*[0-9]|fix(uns)?df[sdt]i|float(un)?[sdt]idf)$")


@dataclass(frozen=True)
class Run:
    invocations: list[list[np.ndarray]]  # each net_run call's outputs, in order
    instructions: int | None       # executed by the first net_run call (None when not counted)
    stdout: str = ""               # what the image printed
    profile: Profile | None = None  # the executed path (when counted)

    @property
    def outputs(self) -> list[np.ndarray]:
        """The first invocation's outputs (the only one's, unless the image runs a sequence)."""
        return self.invocations[0]


def build_image(compiled: CompiledModel, inputs: list[np.ndarray], target: Target, opt=OPT_FLAGS,
                traced: str = "", then: Sequence[list[np.ndarray]] = (), resets: Collection[int] = ()) -> Path:
    """The model and the bare-metal harness on `inputs`, linked for `target` (cached); the image's path. With
    `traced`, the model's C with tracing (cglow.tools.trace), and the harness that prints what it hands over. With
    `then`, net_run runs again on each of those input sets, the state kept, and net_reset before the
    invocations numbered in `resets` (the first is 0; baremetal_source)."""
    main = baremetal_source(compiled, inputs, bool(traced), then, resets)
    files = {**sources(compiled), f"{compiled.name}_main.c": main}
    if traced:
        files[f"{compiled.name}.c"] = traced
    flags = (*opt, *STRICT_FLAGS, *target.cflags)
    if target.linker:
        return build_cached(files, target.cc, flags, f"{target.name}-{{}}.elf", quiet=True,
                            link=(target.linker, *opt, *target.ldflags))
    return build_cached(files, target.cc, (*flags, *target.ldflags), f"{target.name}-{{}}.elf", quiet=True)


def _nm(image: Path, target: Target) -> list[tuple[int, str, str]]:
    """The image's symbols as the target's nm lists them: address, type letter, name."""
    out = subprocess.run([f"{target.binutils}nm", str(image)], capture_output=True, text=True, check=True).stdout
    return [(int(f[0], 16), f[1], f[2]) for f in map(str.split, out.splitlines()) if len(f) == 3]


def symbols(image: Path, target: Target) -> dict[str, int]:
    """The image's symbols and their addresses."""
    return {name: address for address, _, name in _nm(image, target)}


def functions(image: Path, target: Target) -> dict[int, str]:
    """The image's functions by the address of their code (without the Thumb bit)."""
    return {address & ~1: name for address, kind, name in _nm(image, target) if kind in "tT"}


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
def profile_plugin(cc: str = "cc") -> Path:
    """The path-recording QEMU plugin, built with the host compiler into the cache."""
    source = (resources.files("cglow.tools") / "qemu" / "tb_profile.c").read_text()
    return build_cached({"tb_profile.c": source}, cc, ("-O2", *STRICT_FLAGS, "-shared", "-fPIC"),
                        "qemu-tb-profile-{}.so", quiet=True)


def emulate(image: Path, target: Target, count: bool = True, timeout: float = 600.0) -> tuple[str, Profile | None]:
    """Run an image under the target's emulator: what it printed and, with `count`, the path it took between
    its marks (three calls of insn_mark per invocation: cglow.tools.tb_profile)."""
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp, "pairs")
        plugin = ""
        if count:
            mark = symbols(image, target)["insn_mark"] & ~1  # the Thumb bit is not part of the address
            plugin = f"{profile_plugin()},mark={mark:#x},out={records}"
        command = target.command(str(image), plugin)
        try:
            result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
                                    timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{image.name} did not finish under {command[0]} within {timeout:g} s") from None
        if result.returncode:
            raise RuntimeError(f"{image.name} under {command[0]} exited with {result.returncode}: "
                               f"{(result.stdout + result.stderr)[-500:]}")
        if not count:
            return result.stdout, None
        profile = Profile.parse(records.read_text(), mark)
    if profile.intervals < 4 or profile.intervals % 3 != 1:
        raise RuntimeError(f"expected 3 marks per invocation from {image.name}, got {profile.intervals - 1}")
    return result.stdout, profile


def run_image(image: Path, compiled: CompiledModel, target: Target, count: bool = True,
              timeout: float = 600.0) -> Run:
    """Run an image from build_image under the target's emulator: every invocation's outputs and, with
    `count`, the instructions its first net_run call executed and the path they took."""
    stdout, profile = emulate(image, target, count, timeout)
    invocations = parse_output_bits(stdout, compiled)
    if profile is None:
        return Run(invocations, None, stdout)
    return Run(invocations, profile.instructions(CALL) - profile.instructions(EMPTY_CALL), stdout, profile)
