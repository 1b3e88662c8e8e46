"""Register tile sizes per target (`cglow emit --target`): rows x columns of accumulators in the conv and
matrix kernels (output columns x output channels for a channels-last convolution).

The columns are the vectorized dimension; rows x columns / lanes accumulators must fill the vector registers
without spilling, and be enough to hide the multiply-add latency. Measured with `make bench` on x86-64
(Sapphire Rapids, gcc 12 -O3 -march=native; geomean of cglow/onnxruntime over five models):
- AVX-512 (32 x 16 lanes): 8 x 32 -> 16 accumulators, 1.09; 12 x 32 1.10; 6 x 32 1.18; 8 x 16 1.37; 4 x 16 1.67;
  8 x 48 and 4 x 64 spill (2.0-2.2).
- AVX2 (16 x 8 lanes): 6 x 16 -> 12 accumulators, 1.73; 4 x 16 1.85; 8 x 16 2.04; 4 x 24 3.64.
Scalar targets take 6 x 4: 24 accumulators, the 4 weights of an input channel and 1 input fit the 32
single-precision registers of a Cortex-M4F, and each input channel costs 6 + 4 loads and 3 loop instructions
for 24 multiply-adds. `make bench-mcu`, instructions per multiply-accumulate of kws / vww / resnet8: 6 x 4
1.92 / 1.98 / 1.61; 5 x 5 1.90 / 1.98 / 1.70; 4 x 6 1.95 / 2.00 / 1.57; 5 x 4 1.92 / 2.04 / 1.74; 4 x 4
2.06 / 2.12 / 1.70; 7 x 4 spills (1.96 / 2.10 / 1.63); 4 x 16 spilled them all (4.2-4.9 before fused
multiply-adds). A depthwise tile keeps its kernel row's weights (KW x columns) next to its accumulators and
one input column, so it takes 8 x 2 there (vww: 8 x 2 1.98, 10 x 2 1.97, 16 x 1 1.97, 6 x 2 and 4 x 4 2.02,
6 x 4 2.07). With one register per accumulator, a matrix tile of fewer rows takes more columns (`scalar`:
a matrix-vector product as 1 x 24; autoencoder 3.05 -> 2.23), which vector targets do not want (a 1 x 256 tile
was 3% slower on MobileNetV2). `generic` and the vector targets not measured here keep 4 x 16; the Cortex-M55
takes the scalar tiles (its MVE has 8 vector registers, and gcc -O2 does not vectorize). The emitted C
is the same portable C99 for every target; only these sizes change. `host` is the machine cglow runs on."""
from __future__ import annotations

import platform
from dataclasses import dataclass, replace
from pathlib import Path


@dataclass(frozen=True)
class Tiles:
    rows: int
    columns: int
    depthwise: Tiles | None = None  # a depthwise convolution's tile, where it differs
    scalar: bool = False            # one register per accumulator: a matrix tile of fewer rows takes more columns
    integer: Tiles | None = None    # the tile of 8-bit kernels (int32 accumulators), where it differs
    dual_mac: bool = False          # 8-bit kernels as 4-lane dot products (runtime_c/dot4.c): Arm's DSP extension
    float_mac: str = "fma"          # the float kernels' multiply-accumulate: runtime_c/fma.c, or mul_add.c
    panel: Tiles | None = None      # the tile of 8-bit kernels over widened inputs (instr/passes.py widen_inputs)
    vector_dot: Tiles | None = None  # the tile of 8-bit kernels summed as dot products in C (VECTOR_DOT)
    signed_dots: bool = False       # those dot products read int8 inputs (Arm's sdot), not uint8 (x86's vpdpbusd)
    wide_weights: bool = False      # the other 8-bit kernels' weights stored as int32 (vector_dots.py widen_weights)
    column_blocks: Tiles | None = None  # the tile of 8-bit matrix products as outer products (COLUMN_BLOCKS)
    native_half: bool = False       # float16 arithmetic in hardware, which `--half-math native` computes in

    @property
    def for_depthwise(self) -> Tiles:
        return replace(self.depthwise, float_mac=self.float_mac) if self.depthwise else self

    @property
    def for_integer(self) -> Tiles:
        return self.integer or self

    @property
    def for_panel(self) -> Tiles:
        return self.panel or self

    @property
    def chunk_columns(self) -> int:
        """The most output channels of narrow weights a kernel unpacks at a time (instr/narrow_weights.py): 16, or
        its widest tile's where wider (all powers of two), so that chunks hold whole tiles."""
        integer = self.for_integer
        return max(16, self.columns, integer.columns, integer.for_panel.columns, *(t.columns for t in (
            self.vector_dot, self.column_blocks) if t))



# 8-bit kernels on scalar targets accumulate in the 13 general registers, not the float ones: 3 x 2 (4 x 2
# depthwise). Cortex-M4 instructions per MAC, int8 kws / resnet8 / vww, measured with the 64-bit
# requantization of the time: 3 x 2 4.38 / 3.96 / 4.63; 4 x 1 4.39 (kws); 2 x 2 4.88; the float tiles 6 x 4
# spill (8.92 / 7.48 / 9.30); 2 x 4 8.79.
SCALAR_INT8 = Tiles(3, 2, Tiles(4, 2), scalar=True)
# With Arm's DSP extension (Cortex-M4, M7, M33, M55), 8-bit kernels are 4-lane dot products (SMLAD) over weights
# packed with the reduced dim innermost: 2 x 2 tiles, 4 accumulators and the 16-bit pairs of 2 x 2 words in the 13
# registers. Cortex-M4 instructions per MAC, kws / resnet8 / vww: 2.59 / 1.83 / 2.63, against 3.27 / 3.76 / 3.38
# with the 3 x 2 scalar tiles (the same requantization). The inner loop is 23 instructions per 16 MACs; two steps
# per iteration spill. Over a panel of widened inputs (instr/passes.py widen_inputs) it is 19 per 16 MACs with two
# steps per iteration (21 with one; fully unrolled, it spills); with the weights in channel pairs (pair_weights) a
# step is one panel word, and a 3 x 2 tile fits the 13 registers: 13 cycles per 12 MACs where the 2 x 2 tile over
# 4 values took 19 per 16 (kernels/arm_steps.py pair_step). Estimated cycles per MAC, int8 kws / vww / resnet8
# (quantized by cglow): 2.06 / 2.09 / 1.59 -> 1.91 / 1.98 / 1.58. Depthwise convolutions take 3 columns x 4 channels:
# four channels a word, one 16-bit multiply-accumulate each, the even lanes and then the odd ones (runtime_c/mac2.c,
# kernels/conv_direct.j2), so that 6 accumulators are live at a time. kws / vww (onnxruntime-quantized),
# kernels inlined into net_run: 2 x 4 2.49 / 2.60 against 2.60 / 2.62 with the scalar 4 x 2; 1 x 4 2.51 / 2.67, 3 x
# 4 2.49 / 2.62, 4 x 4 2.53 / 2.57, 5 x 4 2.55 / 2.69; kept out of it (runtime_c/kernel.c): 1 x 4 2.37 / 2.44, 2 x
# 4 2.38 / 2.45, 3 x 4 2.37 / 2.47, 4 x 4 2.39 / 2.48. In estimated cycles per MAC (cglow-quantized kws / vww), once
# the bias started the accumulators and the shift was a literal: 1 x 4 1.86 / 1.94, 2 x 4 1.80 / 1.90, 3 x 4 1.80 /
# 1.95, 4 x 4 1.86 / 1.99; summed in halves of two lanes: 2 x 4 1.76 / 1.85, 3 x 4 1.71 / 1.83, 4 x 4 1.74 / 1.83,
# 5 x 4 1.73 / 1.87.
DSP_INT8 = Tiles(2, 2, Tiles(3, 4), scalar=True, dual_mac=True, panel=Tiles(3, 2, scalar=True, dual_mac=True))
# On x86-64, an 8-bit convolution or matrix product whose input, read as unsigned, needs no correction at its borders
# (instr/vector_dots.py rebase_inputs) sums each output as a dot product over its reduced dim: a plain C reduction
# over uint8 inputs by int8 weights, both contiguous (kernels/dot.j2 reduce), which gcc turns into AVX-512 VNNI /
# AVX-VNNI vpdpbusd (and clang 14 into 16-bit vpdpwssd), 4 x 4 reductions a loop sharing their loads. Measured on
# 128 x 64 x K matrix products (gcc 12 -O3 -march=native, Sapphire Rapids), GMAC/s at K = 64 / 256: the 8 x 32 tile
# of int32 multiply-adds over channels 30 / -; reductions 2 x 4 80 / 186, 4 x 4 87 / 224, 2 x 8 88 / 223, 4 x 2 82 /
# 187 (clang 14: 56 / 87 with 4 x 4). A correction summed in the same loop (sum of the weights times the zero point)
# halved them (56 / 117): it is folded into the bias at compile time instead. A tile is 4 x 16, four such loops, so
# that its requantizing epilogue vectorizes over 16 channels (with 4 x 4 tiles it ran scalar, most of the time).
# make bench's int8 models, gcc / clang us, the 8 x 32 tiles -> 4 x 8, 4 x 16, 4 x 32 tiles: kws 96 / 42 -> 67 /
# 55, 55 / 54, 59 / 91; vww 393 / 164 -> 278 / 188, 240 / 167, 241 / 208; resnet8 568 / 370 -> 351 / 300, 302 / 316,
# 338 / 332 (whole tensors; single runs, +-10%).
VECTOR_DOT = Tiles(4, 16)
X86_AVX512 = Tiles(8, 32, vector_dot=VECTOR_DOT, wide_weights=True)
# With AVX-512 VNNI (x86-avx512-vnni: Cascade Lake, Ice Lake, Sapphire Rapids, Zen 4 and later), those that are
# matrix products sum as outer products instead (instr/vector_dots.py block_weights), in its intrinsics
# (runtime_c/vnni.c): 4 rows by 4 blocks of 16 columns, 16 accumulator vectors. Built without VNNI (Skylake-SP), their
# C loops take longer than x86-avx512's dot products (int8 kws, gcc 12 -O3 -mavx512f -mavx512bw -mavx512vl: 230 us
# where x86-avx512's take 133); with it, 44 where those take 76 (-march=native, Zen 4).
COLUMN_BLOCKS = Tiles(4, 64)
# On AArch64 those dot products are signed (signed_dots: int8 inputs by int8 weights; an uint8 input read as int8 with
# its top bit flipped, 128 less), which gcc 12 -O3 -march=armv8.2-a+dotprod turns into sdot (-O2 too; clang 14 into
# 16-bit smlal, 4 lanes a step: no sdot). Not timed here; from gcc's code: in the loop over a long run (a 64 x 1152 x
# 64 matrix product, an unpadded 3x3 convolution of 64 channels), instructions per 64 MACs with 2 / 3 / 4 / 6 / 8 rows:
# 8.5 / 7.3 / 6.8 / 6.2 / 7.4, none spilled but 8 rows' 32 accumulators (12 stack accesses an iteration); the columns
# do not change that loop (one per 4 of them). Executed by the dot kernels under qemu-aarch64 (-O3), instructions per
# 64 MACs (stack accesses), 2 x 16 / 4 x 16 / 6 x 16: int8 kws (onnxruntime's QDQ, runs of 64) 14.0 (3.6) / 16.2 (5.0)
# / 17.2 (6.1), vww 12.0 (1.3) / 14.7 (3.5) / 12.6 (2.0); unpadded 3x3 convolutions of 16, 64, 128 channels 11.1 / 12.7
# / 9.5, 9.3 / 7.8 / 7.3, 8.9 / 7.4 / 7.3; 4 x 8 and 4 x 4 tiles 28.4 and 25.0 on kws, 24.3 and 22.6 on vww. 6 x 16:
# the fewest in the long loops and within 5% of the fewest on vww, 23% more than 2 x 16 on kws's short runs. The other
# 8-bit kernels keep int8 weights (no wide_weights, instr/vector_dots.py widen_weights). Whole models, instructions per
# MAC, generic tiles -> these: int8 kws 0.649 -> 0.402, vww 0.904 -> 0.605, resnet8 0.652 -> 0.649 (its padded
# convolutions' zero point, -128 after a ReLU, is not the signed one: they keep the tiles over output channels).
AARCH64 = Tiles(4, 16, vector_dot=Tiles(6, 16), signed_dots=True, native_half=True)  # half arithmetic with +fp16
VECTOR, SCALAR = Tiles(4, 16), Tiles(6, 4, Tiles(8, 2), scalar=True, integer=SCALAR_INT8)
ARM_DSP = Tiles(6, 4, Tiles(8, 2), scalar=True, integer=DSP_INT8)
# The Cortex-M4F's fused (VFMA) and chained (VMLA) multiply-accumulates take 3 cycles, a multiply and an add 1 each
# (its Technical Reference Manual): its float kernels multiply and add (runtime_c/mul_add.c). Estimated cycles per
# MAC (make bench-mcu), float kws / vww / resnet8 / autoencoder: 6 x 4 tiles fused 4.47 / 4.60 / 3.97 / 5.38; unfused,
# where the products take a register each: 6 x 4 3.87 / 4.01 / 3.08 / 3.79 (it spills), 5 x 4 3.47 / 3.66 / 2.88 / 3.72,
# 4 x 4 3.52 / 3.77 / 2.88 / 3.62, 4 x 5 3.45 / 3.65 / 2.87 / 3.72, 6 x 3 3.58 / 3.81 / 3.05 / 3.71, 5 x 5 3.90 / 4.09 /
# 3.27 / 3.86. The depthwise kernels too (a depthwise tile takes its target's multiply-accumulate): kws / vww 3.45 /
# 3.65 -> 3.33 / 3.57 with 8 x 2 (5 x 2, 10 x 2 the same; 6 x 3, 8 x 1, 4 x 4 up to 2% more). With the assembly loops
# of kernels/arm_steps.py: 4 x 5 3.25 / 3.42 / 2.75 / 3.50, 5 x 4 3.24 / 3.41 / 2.75 / 3.50; a layer whose shape suits
# 4 x 5 better takes it (kernels/kernel.py oriented: vww 3.34 -> 3.33, resnet8 2.74 -> 2.71).
CORTEX_M4 = Tiles(5, 4, Tiles(8, 2), scalar=True, integer=DSP_INT8, float_mac="mul_add")
# Armv8.1-M's floating-point extension has half-precision arithmetic (the Cortex-M55's FPU and MVE): instr/half_math.py.
# The instructions of float16 networks under QEMU with and without it: tests/tools/test_half_math.py.
CORTEX_M55 = replace(ARM_DSP, native_half=True)
TILES = {"generic": VECTOR, "x86-avx2": Tiles(6, 16, vector_dot=VECTOR_DOT, wide_weights=True),
         "x86-avx512": X86_AVX512, "x86-avx512-vnni": replace(X86_AVX512, column_blocks=COLUMN_BLOCKS),
         "aarch64": AARCH64,
         "aarch64-linux": AARCH64, "rv64gcv": VECTOR, "cortex-m3": SCALAR, "cortex-m4": CORTEX_M4,
         "cortex-m7": ARM_DSP, "cortex-m33": ARM_DSP, "cortex-m55": CORTEX_M55, "riscv32": SCALAR, "riscv64": SCALAR,
         "riscv64-linux": SCALAR}
TARGETS = ("host", *TILES)


def host_target(machine: str | None = None, cpuinfo: str | None = None) -> str:
    """The TILES entry for the machine cglow runs on (its architecture and, on Linux, /proc/cpuinfo)."""
    machine = (machine or platform.machine()).lower()
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text(errors="replace") if path.is_file() else ""
    words = set(cpuinfo.split())
    if machine in ("x86_64", "amd64"):
        if {"avx512f", "avx512bw", "avx512_vnni"} <= words:
            return "x86-avx512-vnni"
        return "x86-avx512" if "avx512f" in words else "x86-avx2" if {"avx2", "fma"} <= words else "generic"
    if machine in ("aarch64", "arm64"):
        return "aarch64"
    if machine == "riscv64":
        isa = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("isa")), "")
        return "rv64gcv" if "v" in isa.split("_")[0][4:] else "riscv64-linux"
    return "generic"


def tiles_for(target: str) -> Tiles:
    return TILES[host_target() if target == "host" else target]
