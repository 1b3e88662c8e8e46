"""Hand-scheduled steps of the kernels' inner loops for Arm cores: GNU inline assembly (gcc and clang) of the
8-bit dot products for cores with Arm's DSP extension, used where runtime_c/dsp_asm.c says it may
(CGLOW_DSP_ASM), and of the float multiply-and-adds of the Cortex-M4F's tiles, where runtime_c/fp_asm.c says
so (CGLOW_FP_ASM); the portable C of the same sums elsewhere.

gcc allocates the registers of these kernels' inner loops well but schedules them for instruction count,
not for the Cortex-M4's cycles (cglow.tools.m4_cycles): it scatters the loads, so that few of them pipeline
(a load directly after a load takes 1 cycle, else 2), and at 4 or more accumulators it spills. A step here
is one statement that does a register tile's work for a few values of its sums (2 over a panel, 4 elsewhere),
its loads grouped so that all but the first of a group pipeline. The kernel's loops, pointers and accumulators
stay C; the step takes the pointers and immediate offsets, and leaves the pointers as they were.

A step uses at most 13 registers: r7 is the frame pointer with -fno-omit-frame-pointer (gcc then refuses an asm
that needs it), sp and pc are not allocatable; at -O0, where gcc may need one more to store the accumulators
back into a large frame, the kernels take their C (runtime_c/dsp_asm.c). A tile that does not fit, or whose
offsets exceed an immediate's 4095 bytes, keeps the C.

pair_step is a tile's step over a panel of widened inputs, with the weights in channel pairs (its docstring).
dot_step is for the kernels that read both operands as 8-bit words (runtime_c/dot4.c): each row's word is
unpacked in registers (SXTAB16 adding the offset, the input's zero point negated), then a group of weight
words loaded, each unpacked to its two 16-bit pairs (SXTB16 of it rotated by a byte into a scratch register,
SXTB16 in place) and multiplied into every row's accumulator (SMLAD): rows x columns + 2 rows + group + 3
registers, one more for a nonzero offset. A 2 x 2 tile: 4 loads, 8 unpacks, 8 SMLAD, 21 cycles for 16
multiply-accumulates; 1 x 4, 24."""
from __future__ import annotations

REGISTERS = 13
MAX_OFFSET = 4092
SMLAD = "smlad %[a{i}{j}], %[{x}], %[{w}], %[a{i}{j}]"


def _body(lines: list[str]) -> str:
    """Assembly lines as the string literals of an asm statement, one a line."""
    return "\n".join(f'    "{line}\\n\\t"' for line in lines[:-1]) + f'\n    "{lines[-1]}"'


def _statement(lines: list[str], accs: list[tuple[int, int]], scratch: list[str], inputs: str) -> str:
    """The asm statement in a block declaring its scratch registers (named q..., apart from the kernel's)."""
    body = _body(lines)
    outputs = ", ".join(f'[a{i}{j}] "+r"(acc[{i}][{j}])' for i, j in accs)
    temps = ", ".join(f'[{t}] "=&r"(q{t})' for t in scratch)
    return (f"{{\n    uint32_t {', '.join('q' + t for t in scratch)};\n    __asm__(\n{body}\n"
            f"    : {outputs},\n      {temps}\n    : {inputs}\n    : \"memory\");\n}}")


def pair_step(lefts: list[tuple[int, int]], pairs: list[tuple[int, int, int]]) -> str | None:
    """The asm statement adding to acc[i][2q + lane], for each (i, at) of lefts and (q, at, lanes) of pairs, the
    products of the panel row's word at lp + at bytes (two widened values, as runtime_c/widen4.c writes them)
    with the word of a channel pair's weights at rp + at bytes (instr/passes.py pair_weights: bytes 0 and 2
    the first channel's weights of the two values, 1 and 3 the second's, `lanes` of them used). Each row's word
    and a group of pairs' words are loaded at once (all but the first load pipelined), then each pair's word
    is unpacked (SXTB16 of it rotated by a byte into a scratch register for the second channel, SXTB16 in place
    for the first) and multiplied into every row's two accumulators (SMLAD): accumulators + rows + group + 3
    registers. A 3 x 2 tile: 4 loads (5 cycles), 2 unpacks, 6 SMLAD, 13 cycles for 12 multiply-accumulates,
    where a 2 x 2 tile over a row's 4 values takes 19 for 16. None when it does not fit."""
    rows, accs = len(lefts), len(lefts) * sum(lanes for _, _, lanes in pairs)
    group = min(len(pairs), REGISTERS - accs - rows - 3)
    if group < 1 or max(at for _, at, *_ in lefts + pairs) + 4 > MAX_OFFSET:
        return None
    lines = [f"ldr %[x{i}], [%[lp], #{at}]" for i, at in lefts]
    for first in range(0, len(pairs), group):
        chunk = pairs[first:first + group]
        lines += [f"ldr %[w{g}], [%[rp], #{at}]" for g, (_, at, _) in enumerate(chunk)]
        for g, (q, _, lanes) in enumerate(chunk):
            lines += [f"sxtb16 %[t], %[w{g}], ror #8"] if lanes == 2 else []
            lines += [f"sxtb16 %[w{g}], %[w{g}]"]
            for i, _ in lefts:
                lines += [SMLAD.format(i=i, j=2 * q + lane, x=f"x{i}", w=("t" if lane else f"w{g}"))
                          for lane in range(lanes)]
    scratch = [f"x{i}" for i, _ in lefts] + [f"w{g}" for g in range(group)] + ["t"]
    return _statement(lines, [(i, 2 * q + lane) for i, _ in lefts for q, _, lanes in pairs for lane in range(lanes)],
                      scratch, '[lp] "r"(lp), [rp] "r"(rp)')


def dot_step(lefts: list[tuple[int, int]], rights: list[tuple[int, int]], offset: int, flip: bool) -> str | None:
    """The asm statement adding to acc[i][j], for each (i, at) of lefts and (j, at) of rights, the dot product of
    the row's 4 8-bit values (one word at lp + at bytes; an uint8 word's top bits flipped first, `flip`) plus
    `offset` and the weight column's 4 int8 values (one word at rp + at bytes); None when it does not fit."""
    rows, columns = len(lefts), len(rights)
    group = min(columns, REGISTERS - rows * columns - 2 * rows - 3 - (offset != 0))
    if group < 1 or max(at for _, at in lefts + rights) + 4 > MAX_OFFSET:
        return None
    unpack = "sxtab16 %[x{i}{h}], %[off], %[x{i}a]{ror}" if offset else "sxtb16 %[x{i}{h}], %[x{i}a]{ror}"
    widen = [line for i, _ in lefts for line in (
        *([f"eor %[x{i}a], %[x{i}a], #0x80808080"] if flip else []),
        unpack.format(i=i, h="b", ror=", ror #8"), unpack.format(i=i, h="a", ror=""))]
    lines = [f"ldr %[x{i}a], [%[lp], #{at}]" for i, at in lefts]
    for first in range(0, columns, group):  # the rows' words unpacked after the first group's loads
        chunk = rights[first:first + group]
        lines += [f"ldr %[w{g}], [%[rp], #{at}]" for g, (_, at) in enumerate(chunk)] + (widen if first == 0 else [])
        for g, (j, _) in enumerate(chunk):
            lines += [f"sxtb16 %[t], %[w{g}], ror #8", f"sxtb16 %[w{g}], %[w{g}]"]
            for i, _ in lefts:
                lines += [SMLAD.format(i=i, j=j, x=f"x{i}a", w=f"w{g}"), SMLAD.format(i=i, j=j, x=f"x{i}b", w="t")]
    scratch = [f"x{i}{h}" for i, _ in lefts for h in "ab"] + [f"w{g}" for g in range(group)] + ["t"]
    inputs = '[lp] "r"(lp), [rp] "r"(rp)' + (f', [off] "r"({(offset & 0xffff) * 0x10001}u)' if offset else "")
    return _statement(lines, [(i, j) for i, _ in lefts for j, _ in rights], scratch, inputs)


def nibble_step(lefts: list[tuple[int, int]], rights: list[tuple[int, int]], offset: int, flip: bool) -> str | None:
    """The asm statement adding to acc[i][j], for each (i, at) of lefts and (j, at) of rights, the dot product of the
    row's 8 8-bit values (two words at lp + at bytes; an uint8 word's top bits flipped first, `flip`) plus `offset`
    and the column's 8 nibbles (one word at rp + at bytes, values 0-3 in its bytes' low nibbles, 4-7 in their high
    ones: instr/narrow_weights.py nibble_dots). A row's words are unpacked to 16-bit pairs (SXTB16, or SXTAB16
    adding the offset, which the scratch register holds then), both at once where the registers allow, else a word
    at a time (each column's word loaded for each); then each column's word is loaded and each of its four pairs of
    nibbles masked out of it into the scratch register (AND with a shifted operand, 0x000F000F in a register: the
    nibbles of bytes 0 and 2, or 1 and 3, as 16-bit lanes, matching the pairs of values) and multiplied into every
    row's accumulator (SMLAD). Registers: rows x columns accumulators, 4 or 2 a row, the column's word, the
    scratch, the mask and the two pointers. A 1 x 4 tile: 8 values in 42 instructions (2 loads of values, 4
    unpacks, and per column 1 load, 4 masks, 4 SMLAD), where dot_step takes 44 over two steps of int8 weights.
    None when it does not fit."""
    rows, columns = len(lefts), len(rights)
    fits = [words for words in (2, 1) if rows * columns + 2 * words * rows + 5 <= REGISTERS]
    if not fits or max(at for _, at in lefts) + 8 > MAX_OFFSET or max(at for _, at in rights) + 4 > MAX_OFFSET:
        return None
    words = fits[0]
    unpack = "sxtab16 %[x{i}{p}], %[t], %[x{i}{q}]{ror}" if offset else "sxtb16 %[x{i}{p}], %[x{i}{q}]{ror}"
    pairs = (offset & 0xffff) * 0x10001
    lines = []
    for first in range(0, 2, words):  # the rows' words of this part: both, or one
        lines += [f"ldr %[x{i}{2 * w}], [%[lp], #{at + 4 * (first + w)}]" for i, at in lefts for w in range(words)]
        lines += [f"movw %[t], #{pairs & 0xffff}", f"movt %[t], #{pairs >> 16}"] if offset else []
        for i, _ in lefts:
            for w in range(words):
                lines += [f"eor %[x{i}{2 * w}], %[x{i}{2 * w}], #0x80808080"] if flip else []
                lines += [unpack.format(i=i, p=2 * w + 1, q=2 * w, ror=", ror #8"),
                          unpack.format(i=i, p=2 * w, q=2 * w, ror="")]
        for j, at in rights:
            lines.append(f"ldr %[w], [%[rp], #{at}]")
            for w in range(words):
                for p, shift in ((2 * w, 4 * (first + w)), (2 * w + 1, 8 + 4 * (first + w))):
                    lines.append(f"and %[t], %[m], %[w], lsr #{shift}" if shift else "and %[t], %[m], %[w]")
                    lines += [SMLAD.format(i=i, j=j, x=f"x{i}{p}", w="t") for i, _ in lefts]
    scratch = [f"x{i}{p}" for i, _ in lefts for p in range(2 * words)] + ["w", "t"]
    inputs = '[lp] "r"(lp), [rp] "r"(rp), [m] "r"(0x000F000Fu)'
    return _statement(lines, [(i, j) for i, _ in lefts for j, _ in rights], scratch, inputs)


FLOAT_REGISTERS = 32
MAX_VLDR = 1020     # VLDR's immediate offset
MAX_ADD = 4095      # ADD's 12-bit immediate
MAX_STRING = 4095   # the longest string literal C99 asks a compiler to take (clang -pedantic warns beyond)


def float_loop(rows: int, columns: int, lefts: list[tuple[int, int]], count: int, x_step: int, w_step: int,
               w_stride: int) -> str | None:
    """The asm statement running `count` steps of a rows x columns float tile, acc[i][j] += x[i] * w[j] for each
    (i, x's offset in bytes) of lefts and every j < columns, as a multiply and an add rounded apart (VMUL, VADD:
    what runtime_c/mul_add.c computes, 1 cycle each on a Cortex-M4F where VFMA and VMLA take 3). x[i] is at xp
    plus its offset, w[j] at wp + j * w_stride bytes; a step moves xp by x_step and wp by w_step bytes. Rows
    beyond VLDR's reach of xp (1020 bytes) are read through more pointers, set from xp at the start. The tile's
    accumulators are loaded into s0... (VLDM) and stored back (VSTM) around the loop, which runs four steps an
    iteration where count and the immediates allow, else two, else one; in each step the rows' values and a
    group of weights are loaded in one run (VLDR pipelines like LDR) and then multiplied and added. The float
    registers are all the asm's (declared clobbered: gcc takes 30 operands at most, and a tile has up to 20
    accumulators); volatile, as its results are in memory, not in outputs. Its counter is qn, apart from the
    kernel's names. None when the tile does not fit the 32 registers or a step or a weight's offset does not
    fit its immediate."""
    for unroll in (4, 2, 1):  # four where the immediates and C99's longest string literal allow
        text = count % unroll == 0 and _float_loop(rows, columns, lefts, count, x_step, w_step, w_stride, unroll)
        if text:
            return text
    return None


def _float_loop(rows: int, columns: int, lefts: list[tuple[int, int]], count: int, x_step: int, w_step: int,
                w_stride: int, unroll: int) -> str | None:
    """float_loop's statement with `unroll` steps an iteration, or None where its offsets or its text do not
    fit."""
    accs = rows * columns
    group = min(columns, FLOAT_REGISTERS - accs - len(lefts) - 1)
    reach = MAX_VLDR - (unroll - 1) * x_step
    bases: list[int] = []  # byte offsets from xp of the pointers the rows are read through
    for _, at in lefts:
        if not bases or at - bases[-1] > reach:
            bases.append(at)
    w_offsets = [j * w_stride + s * w_step for j in range(columns) for s in range(unroll)]
    if group < 1 or reach < 0 or max(w_offsets) > MAX_VLDR or max(x_step, w_step) * unroll > MAX_ADD or \
            max(bases) > MAX_ADD or len(bases) > 4:
        return None
    pointers = ["xp"] + [f"x{b}" for b in range(1, len(bases))]  # the operand reading from each base
    read_by = {at: max(b for b in range(len(bases)) if bases[b] <= at) for _, at in lefts}
    x = {i: f"s{accs + n}" for n, (i, _) in enumerate(lefts)}
    w = [f"s{accs + len(lefts) + g}" for g in range(group)]
    p = f"s{accs + len(lefts) + group}"
    lines = [f"add %[{pointers[b]}], %[xp], #{bases[b]}" for b in range(1, len(bases))]
    lines += [f"vldm %[acc], {{s0-s{accs - 1}}}" if accs > 1 else "vldr s0, [%[acc]]", "1:"]
    for s in range(unroll):
        lines += [f"vldr {x[i]}, [%[{pointers[read_by[at]]}], #{at - bases[read_by[at]] + s * x_step}]"
                  for i, at in lefts]
        for first in range(0, columns, group):
            chunk = range(first, min(first + group, columns))
            lines += [f"vldr {w[g]}, [%[wp], #{j * w_stride + s * w_step}]" for g, j in enumerate(chunk)]
            for g, j in enumerate(chunk):
                for i, _ in lefts:
                    acc = f"s{i * columns + j}"
                    lines += [f"vmul.f32 {p}, {x[i]}, {w[g]}", f"vadd.f32 {acc}, {acc}, {p}"]
    lines += [f"add %[{name}], %[{name}], #{x_step * unroll}" for name in pointers]
    lines += [f"add %[wp], %[wp], #{w_step * unroll}", "subs %[n], %[n], #1", "bne 1b",
              f"vstm %[acc], {{s0-s{accs - 1}}}" if accs > 1 else "vstr s0, [%[acc]]"]
    if sum(len(line) + 2 for line in lines) > MAX_STRING:
        return None
    body = _body(lines)
    clobbers = ", ".join(f'"s{r}"' for r in range(accs + len(lefts) + group + 1))
    more = "".join(f', [{name}] "=&r"(q{name})' for name in pointers[1:])
    declare = f"const float *{', *'.join(f'q{name}' for name in pointers[1:])};\n" if len(bases) > 1 else ""
    return (f"{declare}int32_t qn = {count // unroll};\n__asm__ __volatile__(\n{body}\n"
            f"    : [xp] \"+r\"(xp), [wp] \"+r\"(wp), [n] \"+r\"(qn){more}\n"
            f"    : [acc] \"r\"(&acc[0][0])\n    : {clobbers}, \"cc\", \"memory\");")
