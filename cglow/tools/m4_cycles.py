"""Estimated Cortex-M4 cycles of an executed path: each instruction of a recorded profile (cglow.tools.tb_profile)
charged what the Cortex-M4 Technical Reference Manual's timing tables (Table 3-1 and the FPU's
instruction table) say it costs with zero memory wait states, including the rules that depend on the
instruction before it.

The rules, and the choice made where the manual gives a range or a "might":
- Most data processing, multiply (MUL, MLA, the long ones, SMLAD and the other DSP multiplies),
  saturation, packing and extension instructions (SXTB16, SXTAB16, PKHBT...): 1 cycle.
- IT: 1 cycle. The manual says it can be folded onto a preceding 16-bit instruction; not assumed.
- SDIV, UDIV: 2 to 12 by the operands' values; charged 12, the most.
- A single load (LDR, LDRB, LDRH, LDRSB, LDRSH, LDREX, VLDR): 2 cycles, or 1 when it directly follows a
  single load whose loaded register it does not address memory with (the manual's pipelined loads).
- A single store (STR, STRB, STRH, STREX, VSTR): 2, or 1 when it directly follows a single load, as
  above. The manual also says that STR Rx,[Ry,#imm] takes one cycle when the write buffer takes the
  store; that is not assumed.
- A load or store whose address registers the directly preceding instruction computed (data processing,
  not a load): 1 more cycle (the manual: no forwarding path to the address generation).
- A load or store with base update is charged like one without (the Cortex-M3 r2p1 manual's rule that a
  base-update load does not pipeline is not in the M4's).
- LDRD, STRD: 3 cycles, never pipelined with their neighbours.
- LDM, STM, PUSH, POP, VLDM, VSTM, VPUSH, VPOP: 1 + N cycles, N the words moved (a D register is two).
- Branches (B, BL, BX, BLX, CBZ, CBNZ, TBB/TBH at 2 + P, and any instruction that writes the PC: POP or
  LDM with PC at 1 + N + P, LDR PC at 2 + P, MOV or ADD PC at 1 + P): P more cycles when taken, nothing
  when a conditional one is not. The manual's P (a pipeline refill) is 1 to 3 by the target's alignment
  and width and by whether the core speculated the address early; charged 2. Whether a branch was taken
  comes from the recorded path: the next block starts elsewhere than after the branch.
- FPU: VADD, VSUB, VMUL, VNMUL, VABS, VNEG, VCMP, VCVT, VMOV, VMRS, VMSR 1 cycle (VMOV of two core
  registers 2); VMLA, VMLS, VNMLA, VNMLS, VFMA, VFMS, VFNMA, VFNMS 3; VDIV, VSQRT 14.
- Instructions in an IT block are charged as if they executed, whatever their condition (the path does
  not say).
- An instruction of no class above is charged 1 cycle and counted in `unclassified`, by mnemonic.
Not modelled: memory wait states and bus contention, unaligned accesses, the fetch unit's contention with
a literal load (LDR Rx,[PC,#imm] "might add a cycle"), interrupts."""
from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .cross import functions
from .targets import Target
from .tb_profile import CALL, EMPTY_CALL, START, Block, Profile
from .thumb import Insn, disassemble

REFILL = 2          # P
DIVIDE = 12

CLASSES = {
    "alu": "adc add addw adr and asr bfc bfi bic clz eor lsl lsr mov movw movt mvn neg nop orn orr rbit rev "
           "rev16 revsh ror rrx rsb sbc sbfx sub subw ubfx",
    "compare": "cmn cmp teq tst",
    "saturate": "ssat ssat16 usat usat16 qadd qsub qdadd qdsub qadd8 qadd16 qsub8 qsub16 qasx qsax sadd8 sadd16 "
                "ssub8 ssub16 sasx ssax uadd8 uadd16 usub8 usub16 uasx usax uqadd8 uqadd16 uqsub8 uqsub16 uqasx "
                "uqsax shadd8 shadd16 shsub8 shsub16 shasx shsax uhadd8 uhadd16 uhsub8 uhsub16 uhasx uhsax sel "
                "usad8 usada8",
    "unpack": "sxtb sxth sxtb16 sxtab sxtah sxtab16 uxtb uxth uxtb16 uxtab uxtah uxtab16 pkhbt pkhtb",
    "multiply": "mul mla mls smull umull smlal umlal umaal smulbb smulbt smultb smultt smulwb smulwt smlabb "
                "smlabt smlatb smlatt smlawb smlawt smlad smladx smlsd smlsdx smlald smlaldx smlsld smlsldx "
                "smlalbb smlalbt smlaltb smlaltt smuad smuadx smusd smusdx smmul smmulr smmla smmlar smmls "
                "smmlsr",
    "divide": "sdiv udiv",
    "it": "it",
    "branch": "b bl bx blx cbz cbnz tbb tbh",
    "load": "ldr ldrb ldrh ldrsb ldrsh ldrt ldrbt ldrht ldrsbt ldrsht ldrex ldrexb ldrexh pld pli vldr",
    "store": "str strb strh strt strbt strht strex strexb strexh vstr",
    "load-store-double": "ldrd strd",
    "load-store-multiple": "ldm ldmia ldmdb ldmfd ldmea stm stmia stmdb stmea stmfd push pop vldm vldmia vldmdb "
                           "vstm vstmia vstmdb vpush vpop",
    "fp-multiply-add": "vmla vmls vnmla vnmls vfma vfms vfnma vfnms",
    "fp-divide": "vdiv vsqrt",
    "fp": "vadd vsub vmul vnmul vabs vneg vcmp vcmpe vcvt vcvtr vcvta vcvtn vcvtp vcvtm vcvtb vcvtt vmov vmrs "
          "vmsr vsel vseleq vselge vselgt vselvs vmaxnm vminnm vrinta vrintn vrintp vrintm vrintr vrintx vrintz",
    "system": "dmb dsb isb cpsid cpsie mrs msr svc bkpt wfi wfe sev yield udf",
}
CLASS_OF = {base: cls for cls, bases in CLASSES.items() for base in bases.split()}
BASES = frozenset(CLASS_OF)
SINGLE_LOAD, SINGLE_STORE = "load", "store"
NOT_DATA_PROCESSING = frozenset({"compare", "it", "branch", "load", "store", "load-store-double",
                                 "load-store-multiple", "system"})
LONG_MULTIPLIES = frozenset("smull umull smlal umlal umaal smlald smlaldx smlsld smlsldx smlalbb smlalbt smlaltb "
                            "smlaltt".split())


def klass(insn: Insn) -> str:
    return CLASS_OF.get(insn.base, "unclassified")


def loaded_registers(insn: Insn) -> frozenset[int]:
    """The core registers a single load writes with loaded data (its base update is not counted)."""
    return insn.operand_registers(1) if klass(insn) == SINGLE_LOAD else frozenset()


def written_registers(insn: Insn) -> frozenset[int]:
    """The core registers a data-processing instruction writes."""
    cls = klass(insn)
    if cls in NOT_DATA_PROCESSING:
        return frozenset()
    if insn.base in LONG_MULTIPLIES:
        return insn.operand_registers(2)
    if insn.base == "vmov":
        return insn.operand_registers(2) if len(insn.operands) == 3 else insn.operand_registers(1)
    return insn.operand_registers(1)


def writes_pc(insn: Insn) -> bool:
    cls = klass(insn)
    if cls == "branch":
        return True
    if insn.base in ("pop", "ldm", "ldmia", "ldmdb", "ldmfd", "ldmea"):
        return "pc" in insn.register_list
    return cls in ("load", "alu") and 15 in insn.operand_registers(1)


def words_moved(insn: Insn) -> int:
    return sum(2 if r.startswith("d") else 1 for r in insn.register_list)


def base_cycles(insn: Insn, prev: Insn | None) -> int:
    """Cycles of `insn` right after `prev` (None: unknown), a branch counted as not taken."""
    cls = klass(insn)
    if cls in (SINGLE_LOAD, SINGLE_STORE):
        cycles = 2
        if prev is not None and klass(prev) == SINGLE_LOAD and not loaded_registers(prev) & insn.address_registers:
            cycles = 1
        if insn.base == "ldr" and writes_pc(insn):
            cycles = 2
    elif cls == "load-store-double":
        cycles = 3
    elif cls == "load-store-multiple":
        cycles = 1 + words_moved(insn)
    elif cls == "divide":
        cycles = DIVIDE
    elif cls == "fp-multiply-add":
        cycles = 3
    elif cls == "fp-divide":
        cycles = 14
    elif insn.base in ("tbb", "tbh"):
        cycles = 2
    elif insn.base == "vmov" and len(insn.operand_registers(4)) == 2:
        cycles = 2
    else:
        cycles = 1
    if (cls in (SINGLE_LOAD, SINGLE_STORE, "load-store-double", "load-store-multiple") and prev is not None
            and written_registers(prev) & insn.address_registers):
        cycles += 1
    return cycles


@dataclass
class Estimate:
    cycles: int = 0
    instructions: int = 0
    by_class: Counter = field(default_factory=Counter)       # class -> cycles
    by_function: Counter = field(default_factory=Counter)    # the function a block is in -> cycles
    unclassified: Counter = field(default_factory=Counter)   # mnemonic -> executions

    def add(self, other: Estimate, sign: int = 1) -> None:
        self.cycles += sign * other.cycles
        self.instructions += sign * other.instructions
        for mine, theirs in ((self.by_class, other.by_class), (self.by_function, other.by_function),
                             (self.unclassified, other.unclassified)):
            for key, n in theirs.items():
                mine[key] += sign * n


class Code:
    """The instructions of the blocks of one image, and the cycles of each (previous block, block) pair."""

    def __init__(self, code: dict[int, Insn], functions: dict[int, str]):
        self.code = code
        self.blocks: dict[Block, tuple[Insn, ...]] = {}
        self.starts = sorted(functions)
        self.functions = functions

    def function(self, address: int) -> str:
        """The name of the function whose code holds the address."""
        i = bisect.bisect_right(self.starts, address) - 1
        return self.functions[self.starts[i]] if i >= 0 else "?"

    def instructions(self, block: Block) -> tuple[Insn, ...]:
        if block not in self.blocks:
            insns, address = [], block.address
            for _ in range(block.instructions):
                if address not in self.code:
                    raise RuntimeError(f"no instruction at {address:#x} in the disassembly (block at "
                                       f"{block.address:#x})")
                insns.append(self.code[address])
                address = self.code[address].next_address
            self.blocks[block] = tuple(insns)
        return self.blocks[block]

    def pair(self, prev: Block, block: Block, times: int) -> Estimate:
        """The cycles of `block` run `times` times after `prev`, with the refill of prev's branch if taken."""
        est = Estimate()
        before = self.instructions(prev)[-1] if prev != START else None
        if before is not None and writes_pc(before) and before.next_address != block.address:
            est.by_class[klass(before)] += REFILL * times
        for insn in self.instructions(block):
            cycles = base_cycles(insn, before)
            cls = klass(insn)
            est.by_class[cls] += cycles * times
            if cls == "unclassified":
                est.unclassified[insn.text.split()[0]] += times
            before = insn
        est.cycles = sum(est.by_class.values())
        est.instructions = block.instructions * times
        est.by_function[self.function(block.address)] = est.cycles
        return est


def interval_estimate(code: Code, profile: Profile, interval: int) -> Estimate:
    total = Estimate()
    for (prev, block), times in profile.pairs.get(interval, {}).items():
        total.add(code.pair(prev, block, times))
    return total


def estimate(image: Path, target: Target, profile: Profile) -> Estimate:
    """The estimated Cortex-M4 cycles of the net_run call of an image run with a profile (cglow.tools.cross)."""
    code = Code(disassemble(image, f"{target.binutils}objdump", BASES), functions(image, target))
    for pairs in profile.pairs.values():
        for _, block in pairs:
            insns = code.instructions(block)
            if any(i.address == profile.mark for i in insns[1:]):
                raise RuntimeError(f"a block at {block.address:#x} holds the marker past its start")
    total = interval_estimate(code, profile, CALL)
    total.add(interval_estimate(code, profile, EMPTY_CALL), -1)
    return total
