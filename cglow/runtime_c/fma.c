/* a * b + c for the kernels' multiply-accumulate: one fused instruction where fmaf is fast (x86 with FMA,
 * AArch64, Cortex-M4F/M7), a plain multiply and add everywhere else (a library fmaf would be slow there).
 * <math.h> says so with FP_FAST_FMAF, or the compiler with __FP_FAST_FMAF where the C library does not
 * (picolibc and newlib for Cortex-M: with -std=c99, gcc does not contract a * b + c, so the Cortex-M4F ran
 * a multiply and an add, 3.7 instructions per multiply-accumulate on kws where fused ones take 2.7).
 * CGLOW_TILE_LOOP marks the innermost loop of a register tile (one accumulator per iteration). With
 * vectors it should become a few vector instructions, but at -O3 gcc unrolls such a short loop completely
 * first and then fails to vectorize it (8x slower, measured with gcc 12 on x86-64): gcc is told not to
 * unroll it. Without vectors it must be unrolled so that the accumulators live in registers, which gcc
 * does not do at -O2 by itself (3x the instructions per multiply-accumulate on a Cortex-M4).
 * With AVX-512, gcc still prefers 256-bit vectors unless told otherwise; the wide tiles of --target
 * x86-avx512 are made for 512-bit ones (1.5x faster with them, measured with gcc 12 -march=native). */
#if defined(__GNUC__) && !defined(__clang__)
#if defined(__AVX512F__)
#pragma GCC target("prefer-vector-width=512")
#endif
#if defined(__SSE2__) || defined(__ARM_NEON) || defined(__riscv_vector)
#define CGLOW_TILE_LOOP _Pragma("GCC unroll 1")
#else
#define CGLOW_TILE_LOOP _Pragma("GCC unroll 64")
#endif
#else
#define CGLOW_TILE_LOOP
#endif

static float cglow_fma(float a, float b, float c)
{
#if defined(FP_FAST_FMAF) || defined(__FP_FAST_FMAF)
    return fmaf(a, b, c);
#else
    return a * b + c;
#endif
}
