"""Cross targets as data: a compiler with its machine and link flags, and the emulator that runs the image.

A target is a preset, not code: cglow.tools.cross builds every one the same way (the generated C and the
bare-metal harness, `cc -O2 <strict flags> <cflags> <sources> <ldflags>`) and runs `run` with the image
in place of "{image}". Bare-metal presets link picolibc with semihosting start-up code (its output reaches
the host through the emulator) and place code and constants in `flash_bytes` at `flash`, data and stack in
`ram_bytes` at `ram`: the board's memory map, given to picolibc's linker script with --defsym. Linux
presets link a static program for QEMU's user mode and have no such limits (None).

`tiles` is the `cglow emit --target` preset (cglow/tiles.py) whose register tiles suit the target.
`soft_double` says the target has no double-precision floating point in hardware: a double operation would
link libgcc's software helpers, so a float model's image must contain none (cglow.tools.cross.soft_double_helpers).
`linker`, when given, links what `cc` compiled (each file apart) with `ldflags`: clang compiles a bare-metal
preset's C and the preset's gcc links it with picolibc (with_clang), as clang has no picolibc spec file."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

KIB, MIB = 1 << 10, 1 << 20


@dataclass(frozen=True)
class Target:
    name: str
    board: str                     # what the emulator emulates, in words
    cc: str                        # the C compiler
    cflags: tuple[str, ...]        # CPU, instruction set and float ABI (optimization and warnings come apart)
    ldflags: tuple[str, ...]       # C library, start-up code, memory map
    run: tuple[str, ...]           # the emulator's command line; "{image}" is the image's path
    binutils: str                  # prefix of the target's GNU tools (gcc with its C library, nm, size)
    flash_bytes: int | None        # room for code and constants (what a model's weights must fit)
    ram_bytes: int | None          # room for data, bss and stack
    tiles: str                     # the `cglow emit --target` preset for it
    soft_double: bool              # no double-precision floating point in hardware
    linker: str = ""               # the driver linking cc's objects with ldflags ("": cc builds in one step)

    def command(self, image: str, plugin: str = "") -> list[str]:
        """The emulator command running `image`, with `plugin` (a -plugin argument) loaded when given."""
        args = [a.replace("{image}", image) for a in self.run]
        return [args[0], *(("-plugin", plugin) if plugin else ()), *args[1:]]

    @property
    def tools(self) -> tuple[str, ...]:
        """The commands building, inspecting and running an image need."""
        return tuple(dict.fromkeys((self.cc, self.linker or self.cc, f"{self.binutils}gcc", f"{self.binutils}nm",
                                    f"{self.binutils}size", self.run[0])))


def picolibc_semihost(flash: int, flash_bytes: int, ram: int, ram_bytes: int) -> tuple[str, ...]:
    """Link flags for picolibc with semihosting I/O, for a board with this memory map."""
    return ("--specs=picolibc.specs", "--oslib=semihost", "--crt0=semihost",
            f"-Wl,--defsym=__flash={flash:#x}", f"-Wl,--defsym=__flash_size={flash_bytes:#x}",
            f"-Wl,--defsym=__ram={ram:#x}", f"-Wl,--defsym=__ram_size={ram_bytes:#x}")


def qemu_semihost(system: str, machine: str, *options: str) -> tuple[str, ...]:
    """A QEMU system emulator running a semihosting image: the guest's output on stdout, no devices."""
    return (system, "-M", machine, *options, "-display", "none", "-monitor", "none", "-serial", "none",
            "-chardev", "stdio,id=s", "-semihosting-config", "enable=on,target=native,chardev=s",
            "-kernel", "{image}")


def cortex_m(name: str, board: str, machine: str, cflags: tuple[str, ...], memory: tuple[int, int, int, int],
             tiles: str, soft_double: bool) -> Target:
    """An Arm FPGA image in QEMU; `memory` is (flash address, its size, RAM address, its size)."""
    flash, flash_bytes, ram, ram_bytes = memory
    return Target(name, board, "arm-none-eabi-gcc", ("-mthumb", *cflags),
                  picolibc_semihost(flash, flash_bytes, ram, ram_bytes), qemu_semihost("qemu-system-arm", machine),
                  "arm-none-eabi-", flash_bytes, ram_bytes, tiles, soft_double)


PICOLIBC_ARM_INCLUDE = "/usr/lib/picolibc/arm-none-eabi/include"


def with_clang(gcc: Target, name: str) -> Target:
    """A bare-metal Arm preset's image with its C compiled by clang (as armclang and the LLVM embedded toolchain
    users build it): the same CPU flags for the arm-none-eabi triple, picolibc's headers, gcc's enum ABI (the
    size of the smallest type that holds the values; the linker warns when objects disagree), and two defaults
    that gcc and clang from 20 on share for bare-metal Arm, which clang 14 lacks: unaligned word accesses,
    which every Armv7-M core makes (clang 19 on; without, a 4-byte memcpy is read a byte at a time: 2.49
    estimated Cortex-M4 cycles per MAC on int8 kws where gcc takes 1.77), and no frame pointer (clang 20 on;
    r7 kept as one costs the kernels' 13-register steps a spill per loop iteration); the preset's
    gcc links the objects with its flags (they pick picolibc's multilib) and picolibc. clang marks no object's
    stack as non-executable, which the linker would warn about: -z noexecstack says so for the image."""
    return replace(gcc, name=name, board=f"{gcc.board}, built with clang", cc="clang",
                   cflags=("--target=arm-none-eabi", *gcc.cflags, "-fshort-enums", "-munaligned-access",
                           "-fomit-frame-pointer", "-isystem", PICOLIBC_ARM_INCLUDE),
                   linker=gcc.cc, ldflags=(*gcc.cflags, *gcc.ldflags, "-Wl,-z,noexecstack"))


# MPS2 AN385, AN386, AN500: 4 MiB of ZBT SSRAM at 0 serves as flash, 4 MiB at 0x20000000 as RAM
MPS2 = (0x0, 4 * MIB, 0x20000000, 4 * MIB)
# MPS2 AN505 (TrustZone; the core starts in the secure state, so the secure aliases): SSRAM1 at 0x10000000,
# SSRAM2 and 3 (2 MiB each, contiguous) at 0x38000000
AN505 = (0x10000000, 4 * MIB, 0x38000000, 4 * MIB)
# MPS3 AN547: the core fetches its vector table at 0, from the 512 KiB ITCM (secure alias 0x10000000): that is
# the flash; SRAM 2 (4 MiB, secure alias 0x31000000) the RAM
AN547 = (0x10000000, 512 * KIB, 0x31000000, 4 * MIB)


def riscv_virt(name: str, board: str, bits: int, cflags: tuple[str, ...], flash_bytes: int, ram_bytes: int,
               soft_double: bool) -> Target:
    """QEMU's RISC-V virt machine without firmware: RAM from 0x80000000, the first `flash_bytes` as flash."""
    return Target(name, board, "riscv64-unknown-elf-gcc", (*cflags, "-mcmodel=medany"),
                  picolibc_semihost(0x80000000, flash_bytes, 0x80000000 + flash_bytes, ram_bytes),
                  qemu_semihost(f"qemu-system-riscv{bits}", "virt", "-bios", "none"), "riscv64-unknown-elf-",
                  flash_bytes, ram_bytes, name, soft_double)


def linux_user(arch: str, cflags: tuple[str, ...] = ()) -> Target:
    """A static Linux program (glibc) under QEMU's user mode."""
    return Target(f"{arch}-linux", f"{arch} Linux user mode", f"{arch}-linux-gnu-gcc", cflags, ("-static",),
                  (f"qemu-{arch}", "{image}"), f"{arch}-linux-gnu-", None, None, f"{arch}-linux", False)


def gcc_cross_dir(triple: str) -> Path:
    """The newest library folder of Debian's GCC cross compiler for `triple` (crt files, libgcc)."""
    versions = sorted(Path("/usr/lib/gcc-cross", triple).glob("*"),
                      key=lambda p: [int(v) for v in p.name.split(".") if v.isdigit()])
    return versions[-1] if versions else Path("/usr/lib/gcc-cross", triple)


def rv64gcv() -> Target:
    """RV64GCV Linux user mode, built with clang (gcc 12 does not vectorize for RVV). clang 14 vectorizes for
    RVV only when told the minimum vector length (128 bits, QEMU's vlen); it would take the crt files and
    libgcc of the bare-metal riscv64-unknown-elf GCC, so it is pointed at the Linux cross GCC's."""
    libraries = gcc_cross_dir("riscv64-linux-gnu")
    return Target("rv64gcv", "RV64GCV (VLEN 128) Linux user mode", "clang",
                  ("--target=riscv64-linux-gnu", "-march=rv64gcv", "-mllvm", "-riscv-v-vector-bits-min=128"),
                  ("--sysroot=/usr/riscv64-linux-gnu", f"-B{libraries}", f"-L{libraries}", "-static"),
                  ("qemu-riscv64", "-cpu", "rv64,v=true,vlen=128,vext_spec=v1.0", "{image}"), "riscv64-linux-gnu-",
                  None, None, "rv64gcv", False)


CORTEX_M4 = cortex_m("cortex-m4", "Cortex-M4F on mps2-an386", "mps2-an386",
                     ("-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"), MPS2, "cortex-m4", True)
TARGETS = {t.name: t for t in (
    CORTEX_M4,
    with_clang(CORTEX_M4, "cortex-m4-clang"),
    cortex_m("cortex-m3", "Cortex-M3 (soft float) on mps2-an385", "mps2-an385",
             ("-mcpu=cortex-m3", "-mfloat-abi=soft"), MPS2, "cortex-m3", True),
    cortex_m("cortex-m7", "Cortex-M7 (double-precision FPU) on mps2-an500", "mps2-an500",
             ("-mcpu=cortex-m7", "-mfpu=fpv5-d16", "-mfloat-abi=hard"), MPS2, "cortex-m7", False),
    cortex_m("cortex-m33", "Cortex-M33 (single-precision FPU) on mps2-an505", "mps2-an505",
             ("-mcpu=cortex-m33", "-mfpu=fpv5-sp-d16", "-mfloat-abi=hard"), AN505, "cortex-m33", True),
    cortex_m("cortex-m55", "Cortex-M55 (MVE, FPU) on mps3-an547", "mps3-an547",
             ("-mcpu=cortex-m55", "-mfloat-abi=hard"), AN547, "cortex-m55", False),
    riscv_virt("riscv32", "RV32IMAC (soft float) on QEMU virt", 32, ("-march=rv32imac", "-mabi=ilp32"),
               4 * MIB, 4 * MIB, True),
    riscv_virt("riscv64", "RV64IMAFDC on QEMU virt", 64, ("-march=rv64imafdc", "-mabi=lp64d"), 64 * MIB, 32 * MIB,
               False),
    linux_user("riscv64", ("-march=rv64gc", "-mabi=lp64d")),
    rv64gcv(),
    # QEMU's default cpu, max, has sdot (tiles.py) and half-precision arithmetic (--half-math native)
    linux_user("aarch64", ("-march=armv8.2-a+dotprod+fp16",)),
)}
