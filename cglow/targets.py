"""Cross targets as data: a compiler with its machine and link flags, and the emulator that runs the image.

A target is a preset, not code: cglow.cross builds every one the same way (the generated C and the
bare-metal harness, `cc -O2 <strict flags> <cflags> <sources> <ldflags>`) and runs `run` with the image
in place of "{image}". Bare-metal presets link picolibc with semihosting start-up code (its output reaches
the host through the emulator) and place code and constants in `flash_bytes` at `flash`, data and stack in
`ram_bytes` at `ram`: the board's memory map, given to picolibc's linker script with --defsym. Linux
presets link a static program for QEMU's user mode and have no such limits (None)."""
from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True)
class Target:
    name: str
    board: str                     # what the emulator emulates, in words
    cc: str                        # the C compiler
    cflags: tuple[str, ...]        # CPU, instruction set and float ABI (optimization and warnings come apart)
    ldflags: tuple[str, ...]       # C library, start-up code, memory map
    run: tuple[str, ...]           # the emulator's command line; "{image}" is the image's path
    binutils: str                  # prefix of the target's nm and size
    flash_bytes: int | None        # room for code and constants (what a model's weights must fit)
    ram_bytes: int | None          # room for data, bss and stack

    def command(self, image: str, plugin: str = "") -> list[str]:
        """The emulator command running `image`, with `plugin` (a -plugin argument) loaded when given."""
        args = [a.replace("{image}", image) for a in self.run]
        return [args[0], *(("-plugin", plugin) if plugin else ()), *args[1:]]


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


def mps2(name: str, board: str, machine: str, cflags: tuple[str, ...]) -> Target:
    """An Arm MPS2 FPGA image in QEMU (AN385, AN386, AN500): 4 MiB of ZBT SSRAM at 0 serves as flash,
    4 MiB at 0x20000000 as RAM."""
    return Target(name, board, "arm-none-eabi-gcc", ("-mthumb", *cflags),
                  picolibc_semihost(0x0, 4 * MIB, 0x20000000, 4 * MIB), qemu_semihost("qemu-system-arm", machine),
                  "arm-none-eabi-", 4 * MIB, 4 * MIB)


def riscv_virt(name: str, board: str, bits: int, cflags: tuple[str, ...], flash_bytes: int, ram_bytes: int) -> Target:
    """QEMU's RISC-V virt machine without firmware: RAM from 0x80000000, the first `flash_bytes` as flash."""
    return Target(name, board, "riscv64-unknown-elf-gcc", (*cflags, "-mcmodel=medany"),
                  picolibc_semihost(0x80000000, flash_bytes, 0x80000000 + flash_bytes, ram_bytes),
                  qemu_semihost(f"qemu-system-riscv{bits}", "virt", "-bios", "none"), "riscv64-unknown-elf-",
                  flash_bytes, ram_bytes)


def linux_user(arch: str) -> Target:
    """A static Linux program (glibc) under QEMU's user mode."""
    return Target(f"{arch}-linux", f"{arch} Linux user mode", f"{arch}-linux-gnu-gcc", (), ("-static",),
                  (f"qemu-{arch}", "{image}"), f"{arch}-linux-gnu-", None, None)


TARGETS = {t.name: t for t in (
    mps2("cortex-m4", "Cortex-M4F on mps2-an386", "mps2-an386",
         ("-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard")),
    mps2("cortex-m3", "Cortex-M3 (soft float) on mps2-an385", "mps2-an385", ("-mcpu=cortex-m3", "-mfloat-abi=soft")),
    mps2("cortex-m7", "Cortex-M7 on mps2-an500", "mps2-an500",
         ("-mcpu=cortex-m7", "-mfpu=fpv5-d16", "-mfloat-abi=hard")),
    riscv_virt("riscv32", "RV32IMAFC on QEMU virt", 32, ("-march=rv32imafc", "-mabi=ilp32f"), 4 * MIB, 4 * MIB),
    riscv_virt("riscv64", "RV64GC on QEMU virt", 64, ("-march=rv64imafdc", "-mabi=lp64d"), 64 * MIB, 32 * MIB),
    linux_user("riscv64"),
    linux_user("aarch64"),
)}
