"""Hand-scheduled steps of the 8-bit dot-product kernels for cores with Arm's DSP extension: GNU inline
assembly (gcc and clang) that the kernels use where runtime_c/dsp_asm.c says it may (CGLOW_DSP_ASM), the
portable C of the same sums elsewhere.

gcc allocates the registers of these kernels' inner loops well but schedules them for instruction count,
not for the Cortex-M4's cycles (cglow.m4_cycles): it scatters the loads, so that few of them pipeline
(a load directly after a load takes 1 cycle, else 2), and at 4 or more accumulators it spills. A step here
is one statement that does a register tile's work for 4 values of its sums, its loads grouped so that all
but the first of a group pipeline. The kernel's loops, pointers and accumulators stay C; the step takes the
pointers and immediate offsets, and leaves the pointers as they were.

A step uses at most 13 registers: r7 is the frame pointer at -O0 and with -fno-omit-frame-pointer (gcc then
refuses an asm that needs it), sp and pc are not allocatable. Two schedules:
- inputs first: every row's two panel words and a group of weight words are loaded at once (all but the
  first load pipelined), then each weight is unpacked to its two 16-bit pairs (SXTB16 of it rotated by a
  byte into a scratch register, SXTB16 in place) and multiplied into every row's accumulator (SMLAD):
  rows x columns + 2 rows + group + 3 registers. A 2 x 2 tile: 6 loads (7 cycles), 4 unpacks, 8 SMLAD,
  19 cycles for 16 multiply-accumulates; 1 x 4, 23.
- weights first, where a group of one weight does not fit: the weights are unpacked once and stay in
  registers while each row's two words are loaded and multiplied: rows x columns + 2 columns + 4.
A tile that fits neither, or whose offsets exceed an immediate's 4095 bytes, keeps the C."""
from __future__ import annotations

REGISTERS = 13
MAX_OFFSET = 4092


def _operands(rows: int, columns: int, scratch: list[str]) -> str:
    accs = ", ".join(f'[a{i}{j}] "+r"(acc[{i}][{j}])' for i in range(rows) for j in range(columns))
    temps = ", ".join(f'[{t}] "=&r"(q{t})' for t in scratch)
    return f': {accs},\n  {temps}\n: [lp] "r"(lp), [rp] "r"(rp)\n: "memory"'


def _statement(lines: list[str], rows: int, columns: int, scratch: list[str]) -> str:
    """The asm statement in a block declaring its scratch registers (named q..., apart from the kernel's)."""
    body = "\n".join(f'    "{line}\\n\\t"' for line in lines[:-1]) + f'\n    "{lines[-1]}"'
    return (f"{{\n    uint32_t {', '.join('q' + t for t in scratch)};\n    __asm__(\n{body}\n    "
            + _operands(rows, columns, scratch).replace("\n", "\n    ") + ");\n}")


def panel_step(lefts: list[int], rights: list[int]) -> str | None:
    """The asm statement adding, for every row i and column j of a tile, the dot product of the panel row's 4
    widened values (two words at lp + lefts[i] bytes, as runtime_c/widen4.c writes them) and the weight
    column's 4 int8 values (one word at rp + rights[j] bytes) to acc[i][j]; None when it does not fit."""
    rows, columns = len(lefts), len(rights)
    if max(lefts + rights) + 4 > MAX_OFFSET:
        return None
    smlad = "smlad %[a{i}{j}], %[{x}], %[{w}], %[a{i}{j}]"
    group = min(columns, REGISTERS - rows * columns - 2 * rows - 3)
    if group >= 1:
        scratch = [f"x{i}{h}" for i in range(rows) for h in "ab"] + [f"w{g}" for g in range(group)] + ["t"]
        lines = [f"ldr %[x{i}{h}], [%[lp], #{lefts[i] + 4 * (h == 'b')}]" for i in range(rows) for h in "ab"]
        for first in range(0, columns, group):
            chunk = list(range(first, min(first + group, columns)))
            lines += [f"ldr %[w{g}], [%[rp], #{rights[j]}]" for g, j in enumerate(chunk)]
            for g, j in enumerate(chunk):
                lines += [f"sxtb16 %[t], %[w{g}], ror #8", f"sxtb16 %[w{g}], %[w{g}]"]
                for i in range(rows):
                    lines += [smlad.format(i=i, j=j, x=f"x{i}a", w=f"w{g}"),
                              smlad.format(i=i, j=j, x=f"x{i}b", w="t")]
        return _statement(lines, rows, columns, scratch)
    if rows * columns + 2 * columns + 4 > REGISTERS:
        return None
    scratch = [f"w{j}{h}" for j in range(columns) for h in "ab"] + ["xa", "xb"]
    lines = [f"ldr %[w{j}a], [%[rp], #{rights[j]}]" for j in reversed(range(columns))]
    for n, i in enumerate(reversed(range(rows))):
        lines += [f"ldr %[xa], [%[lp], #{lefts[i]}]", f"ldr %[xb], [%[lp], #{lefts[i] + 4}]"]
        if n == 0:
            for j in range(columns):
                lines += [f"sxtb16 %[w{j}b], %[w{j}a], ror #8", f"sxtb16 %[w{j}a], %[w{j}a]"]
        for j in range(columns):
            lines += [smlad.format(i=i, j=j, x="xa", w=f"w{j}a"), smlad.format(i=i, j=j, x="xb", w=f"w{j}b")]
    return _statement(lines, rows, columns, scratch)
