"""Build generated C on the host (a shared library, cached by a hash of source, compiler and flags)
and call it from Python through cffi with NumPy arrays."""
from __future__ import annotations

from functools import lru_cache
import hashlib
import os
from pathlib import Path
import shutil
import subprocess
import tempfile
import time

import cffi
import numpy as np

from ..compiler import CompiledModel
from ..errors import CglowError

STRICT_FLAGS = ("-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-Wdouble-promotion")
HOST_FLAGS = ("-O2",) + STRICT_FLAGS


def need_compiler(cc: str) -> None:
    """A missing C compiler is the user's problem: one line that says what to do."""
    if shutil.which(cc) is None:
        raise CglowError(f"C compiler '{cc}' not found; install one or pass --cc")


def cache_dir() -> Path:
    return Path(os.environ.get("CGLOW_CACHE") or Path.home() / ".cache" / "cglow")


@lru_cache(maxsize=None)
def compiler_version(cc: str) -> str:
    return subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout


def _written(sources: dict[str, str], folder: str) -> list[str]:
    """The sources (file name -> text) written into folder; the paths of those a compiler takes (C, and
    assembly to preprocess), in name order."""
    for file, text in sources.items():
        Path(folder, file).write_text(text)
    return [str(Path(folder, f)) for f in sorted(sources) if f.endswith((".c", ".S"))]


def build_cached(sources: dict[str, str], cc: str, flags, name: str, salt: str = "", quiet: bool = False,
                 link: tuple[str, ...] = ()) -> Path:
    """Compile the .c and .S files among `sources` (file name -> text) with cc and flags into the cache, keyed by a
    hash of the sources, the compilers' versions, the flags and `salt`; return the file's path. With `link` (a
    driver and its flags), cc compiles each file apart (-c) and that command links the objects: one compiler's
    code with another's C library and start-up code. Any compiler message fails the build when `quiet`."""
    flags = list(flags)
    key = (compiler_version(cc), salt, flags, sorted(sources.items()))
    if link:
        key += (compiler_version(link[0]), link)
    digest = hashlib.sha256(repr(key).encode()).hexdigest()
    target = cache_dir() / name.format(digest)
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        c_files = _written(sources, tmp)
        out = str(Path(tmp, "out"))
        start = time.perf_counter()
        if link:
            for c in c_files:
                _run([cc, *flags, "-c", "-o", f"{c}.o", c], quiet)
            _run([*link, "-o", out, *(f"{c}.o" for c in c_files), "-lm"], quiet)
        else:
            _run([cc, *flags, "-o", out, *c_files, "-lm"], quiet)
        _seconds(target).write_text(f"{time.perf_counter() - start:.3f}\n")
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        os.replace(out, partial)
        os.replace(partial, target)
    return target


def _run(command: list[str], quiet: bool) -> None:
    """Run a compiler or linker; its failure (or any message, when `quiet`) raises with what it said."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode or quiet and result.stderr:
        raise RuntimeError(f"{' '.join(command)} failed on generated code:\n{result.stderr[:4000]}")


def _seconds(built: Path) -> Path:
    return built.with_name(built.name + ".seconds")


def build_seconds(built: Path) -> float | None:
    """How long the compiler took to build a file of the cache (build_cached), when it was built; None if unknown."""
    try:
        return float(_seconds(built).read_text())
    except (OSError, ValueError):
        return None


def build_shared(sources: dict[str, str], cc: str = "cc", cflags=HOST_FLAGS) -> Path:
    """The .c files among `sources` as a shared library in the cache."""
    return build_cached(sources, cc, list(cflags) + ["-fPIC", "-shared"], "{}.so")


def check_warnings(sources: dict[str, str], cc: str, cflags=STRICT_FLAGS) -> None:
    """Compile the .c and .S files among `sources` with `cc -fsyntax-only` under cflags (warnings are errors by
    default); a pass is remembered in the cache by the same kind of hash as built libraries."""
    flags = list(cflags) + ["-fsyntax-only"]
    digest = hashlib.sha256(repr((compiler_version(cc), flags, sorted(sources.items()))).encode()).hexdigest()
    marker = cache_dir() / f"{digest}.ok"
    if marker.exists():
        return
    with tempfile.TemporaryDirectory() as tmp:
        c_files = _written(sources, tmp)
        result = subprocess.run([cc, *flags, *c_files], capture_output=True, text=True)
        if result.returncode or result.stderr:
            raise RuntimeError(f"{cc} rejects or warns about generated code:\n{result.stderr}")
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()


def aligned_zeros(nbytes: int, align: int) -> np.ndarray:
    """At least `nbytes` zero bytes (never none) that start at a multiple of `align`."""
    memory = np.zeros(nbytes + align, np.uint8)
    return memory[-memory.ctypes.data % align:]


class HostModel:
    """A compiled model loaded into this process: call it with arrays of the input dtypes and shapes.

    With external weights it passes `weights` (the weights file's bytes; by default the compiled ones)."""

    def __init__(self, compiled: CompiledModel, library: Path, weights: bytes | None = None):
        self.compiled = compiled
        self.ffi = cffi.FFI()
        options, name = compiled.options, compiled.name
        io = [(f"input_{i}", t.ctype) for i, t in enumerate(compiled.inputs)] + \
            [(f"output_{i}", t.ctype) for i, t in enumerate(compiled.outputs)] + \
            [(f"output_{i}_count", "int64_t") for i in counted_outputs(compiled)]
        params = [] if options.io_in_arena else [f"{'const ' if n.startswith('in') else ''}{t} *" for n, t in io]
        params = ["void *"] * options.caller_arena + ["const void *"] * options.external_weights + params
        declarations = [f"int {name}_run({', '.join(params) or 'void'});"]
        if options.io_in_arena and not options.caller_arena:
            declarations += [f"{t} *{name}_{n}(void);" for n, t in io]
        if compiled.plan.state_bytes:
            declarations.append(f"void {name}_reset({'void *' if options.caller_arena else 'void'});")
        self.ffi.cdef("\n".join(declarations))
        self.lib = self.ffi.dlopen(str(library))
        self.fn = getattr(self.lib, f"{name}_run")
        if options.caller_arena:
            self.arena_memory = aligned_zeros(compiled.arena_bytes, compiled.plan.align)
            self.arena = self.ffi.cast("void *", self.ffi.from_buffer(self.arena_memory))
        if options.external_weights:  # at a page boundary: more than any NET_WEIGHTS_ALIGN (Options.align <= 4096)
            blob = np.frombuffer(compiled.weights_blob if weights is None else weights, np.uint8)
            if blob.size != compiled.weights_bytes:
                raise ValueError(f"the weights are {blob.size} bytes, {name}_run expects {compiled.weights_bytes}")
            self.weights_memory = aligned_zeros(blob.size, 4096)
            self.weights_memory[:blob.size] = blob
            self.weights = self.ffi.cast("const void *", self.ffi.from_buffer(self.weights_memory))
        if options.io_in_arena:  # where each input and output lives
            ids = compiled.program.inputs + compiled.program.outputs
            self.slots = [self._in_arena(n, t, compiled.plan.offsets[b]) for (n, t), b in zip(io, ids)]
        self.reset()  # a library loaded twice is one in memory: a new model starts from no state all the same

    def reset(self) -> None:
        """Forget the state a streaming model keeps between runs (if it has any): the next run is as the first."""
        if self.compiled.plan.state_bytes:
            reset = getattr(self.lib, f"{self.compiled.name}_reset")
            reset(*([self.arena] if self.compiled.options.caller_arena else []))

    def _in_arena(self, name: str, ctype: str, offset: int):
        if self.compiled.options.caller_arena:
            return self.ffi.cast(f"{ctype} *", self.ffi.cast("char *", self.arena) + offset)
        return getattr(self.lib, f"{self.compiled.name}_{name}")()

    def run(self, *inputs: np.ndarray) -> list[np.ndarray]:
        """The outputs of a run on these inputs; an output of run-time length cut to its count along its counted
        dim (run_whole gives the arrays whole, and the counts)."""
        return cut_to_counts(self.compiled, *self.run_whole(*inputs))

    __call__ = run

    def run_whole(self, *inputs: np.ndarray) -> tuple[list[np.ndarray], list[int]]:
        """The outputs of a run at their capacity, and the count of each output of run-time length (in output
        order)."""
        if len(inputs) != len(self.compiled.inputs):
            raise ValueError(f"expected {len(self.compiled.inputs)} inputs, got {len(inputs)}")
        for x, info in zip(inputs, self.compiled.inputs):
            if not isinstance(x, np.ndarray) or x.dtype != info.dtype:
                raise TypeError(f"input '{info.name}' must be a {info.dtype.name} ndarray")
            if x.shape != info.shape:
                raise ValueError(f"input '{info.name}' has shape {x.shape}, expected {info.shape}")
            if not x.flags.c_contiguous:
                raise ValueError(f"input '{info.name}' must be C-contiguous (use np.ascontiguousarray)")
        outputs = [np.zeros(info.shape, info.dtype) for info in self.compiled.outputs]
        counts = [np.zeros(1, np.int64) for _ in counted_outputs(self.compiled)]
        options = self.compiled.options
        args = ([self.arena] if options.caller_arena else []) + ([self.weights] if options.external_weights else [])
        if self.compiled.options.io_in_arena:
            for x, slot in zip(inputs, self.slots):
                self.ffi.memmove(slot, x.tobytes(), x.nbytes)
        else:
            ctypes = [t.ctype for t in (*self.compiled.inputs, *self.compiled.outputs)] + ["int64_t"] * len(counts)
            args += [self.ffi.cast(f"{ctype} *", self.ffi.from_buffer(a if a.size else np.zeros(1, a.dtype)))
                     for a, ctype in zip((*inputs, *outputs, *counts), ctypes)]
        status = self.fn(*args)
        if status:
            raise RuntimeError(f"{self.compiled.name}_run returned {status}")
        if self.compiled.options.io_in_arena:
            for y, slot in zip(outputs + counts, self.slots[len(inputs):]):
                self.ffi.memmove(self.ffi.from_buffer(y), slot, y.nbytes)
        return outputs, [int(c[0]) for c in counts]


def counted_outputs(compiled: CompiledModel) -> list[int]:
    """The outputs of run-time length, whose counts net_run writes after the outputs (docs/c-api.md)."""
    return [i for i, t in enumerate(compiled.outputs) if t.counted is not None]


def cut_to_counts(compiled: CompiledModel, outputs: list[np.ndarray], counts) -> list[np.ndarray]:
    """The outputs with each one of run-time length cut to its count (in the order of counted_outputs) along its
    counted dim, or kept whole where the count exceeds a capacity that --capacity lowered (docs/c-api.md)."""
    outputs = list(outputs)
    for i, count in zip(counted_outputs(compiled), counts):
        at = compiled.outputs[i].counted
        outputs[i] = np.take(outputs[i], np.arange(min(int(count), outputs[i].shape[at])), axis=at)
    return outputs


def sources(compiled: CompiledModel) -> dict[str, str]:
    return {f"{compiled.name}.c": compiled.c_source, f"{compiled.name}.h": compiled.h_source}


def build(compiled: CompiledModel, cc: str = "cc", cflags=HOST_FLAGS, weights: bytes | None = None) -> HostModel:
    return HostModel(compiled, build_shared(sources(compiled), cc, cflags), weights)
