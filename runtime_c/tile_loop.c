/* CGLOW_TILE_LOOP marks the innermost loop of a register tile (one accumulator per iteration). With
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
