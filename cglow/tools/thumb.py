"""Thumb-2 instructions of an Arm image, from the target's objdump: each one's address, size, mnemonic
(split into its base, condition and flag-setting suffix) and the core registers it writes and addresses
memory with. What cglow.tools.m4_cycles needs to charge an instruction its cycles; objdump does the decoding."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
import re
import subprocess

CONDITIONS = frozenset("eq ne cs hs cc lo mi pl vs vc hi ls ge lt gt le al".split())
# the base mnemonics that take an S (flag-setting) suffix in Thumb-2
FLAG_SETTING = frozenset("adc add and asr bic eor lsl lsr mla mov mul mvn neg orn orr ror rrx rsb sbc sub "
                         "smlal smull umlal umull".split())
REGISTER_NAMES = {**{f"r{i}": i for i in range(16)}, "sb": 9, "sl": 10, "fp": 11, "ip": 12, "sp": 13, "lr": 14,
                  "pc": 15}
ADDRESS = re.compile(r"^\s*([0-9a-f]+):$")


@dataclass(frozen=True)
class Insn:
    address: int
    size: int                       # bytes: 2 or 4
    base: str                       # the mnemonic without condition, S suffix, width or data type: "ldr", "vmla"
    condition: str                  # "" when unconditional
    operands: tuple[str, ...]       # as objdump prints them, split at top-level commas
    text: str                       # the whole instruction as objdump prints it

    @property
    def next_address(self) -> int:
        return self.address + self.size

    @property
    def memory_operand(self) -> str:
        """The bracketed address operand ("[r3, #4]!"), or "" for none."""
        return next((op for op in self.operands if op.startswith("[")), "")

    @property
    def address_registers(self) -> frozenset[int]:
        """The core registers the instruction computes a memory address from (base and index; the stack
        pointer for push and pop, the base of a load or store multiple)."""
        if self.memory_operand:
            return registers(self.memory_operand)
        if self.base in ("push", "pop", "vpush", "vpop"):
            return frozenset({13})
        if self.base.startswith(("ldm", "stm", "vldm", "vstm")) and self.operands:
            return registers(self.operands[0])
        return frozenset()

    @property
    def register_list(self) -> tuple[str, ...]:
        """The registers of a {...} list, ranges expanded ("{s16-s19}" is four)."""
        group = next((op for op in self.operands if op.startswith("{")), "")
        names: list[str] = []
        for item in (i.strip() for i in group.strip("{}").split(",") if i.strip()):
            first, _, last = item.partition("-")
            if last:
                prefix = first.rstrip("0123456789")
                names += [f"{prefix}{i}" for i in range(int(first[len(prefix):]), int(last[len(prefix):]) + 1)]
            else:
                names.append(first)
        return tuple(names)

    def operand_registers(self, count: int) -> frozenset[int]:
        """The core registers among the first `count` operands."""
        return frozenset(REGISTER_NAMES[op] for op in self.operands[:count] if op in REGISTER_NAMES)


def registers(text: str) -> frozenset[int]:
    """The core registers named in an operand's text."""
    return frozenset(REGISTER_NAMES[name] for name in re.findall(r"\b([a-z]{2}|r1[0-5]|r[0-9])\b", text)
                     if name in REGISTER_NAMES)


def split_operands(text: str) -> tuple[str, ...]:
    """Operands split at the commas outside brackets and braces."""
    parts, depth, current = [], 0, ""
    for ch in text.strip():
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    return tuple(p for p in (*parts, current.strip()) if p)


def split_mnemonic(mnemonic: str, bases: frozenset[str]) -> tuple[str, str]:
    """(base, condition) of a mnemonic such as "addseq.w", "bne.n", "ldrsbhi" or "vmla.f32"; the base is
    "" when no known base fits."""
    word = mnemonic.split(".")[0]
    if re.fullmatch(r"it[te]{0,3}", word):
        return "it", ""
    for end in range(len(word), 0, -1):
        base, rest = word[:end], word[end:]
        if base not in bases:
            continue
        if base in FLAG_SETTING and rest.startswith("s") and (rest[1:] == "" or rest[1:] in CONDITIONS):
            rest = rest[1:]
        if rest == "" or rest in CONDITIONS:
            return base, rest
    return "", ""


def parse(objdump: str, bases: frozenset[str]) -> dict[int, Insn]:
    """The instructions of `objdump -d` output, by address."""
    out = {}
    for line in objdump.splitlines():
        fields = line.split("\t")          # address:, raw halfwords, mnemonic, operands, comment
        where = ADDRESS.match(fields[0])
        if not where or len(fields) < 3 or fields[2].startswith("."):   # .word, .short: a literal pool
            continue
        address, mnemonic = int(where[1], 16), fields[2].strip()
        operands = fields[3].split("<")[0] if len(fields) > 3 else ""   # without "<symbol+offset>"
        base, condition = split_mnemonic(mnemonic, bases)
        out[address] = Insn(address, 2 * len(fields[1].split()), base or mnemonic, condition,
                            split_operands(operands), f"{mnemonic} {operands.strip()}".strip())
    return out


@lru_cache(maxsize=8)
def disassemble(image: Path, objdump: str, bases: frozenset[str]) -> dict[int, Insn]:
    """The image's Thumb instructions (cached per image path: images are cached by content hash)."""
    text = subprocess.run([objdump, "-d", str(image)], capture_output=True, text=True, check=True).stdout
    return parse(text, bases)
