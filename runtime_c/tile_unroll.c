/* CGLOW_TILE_UNROLL marks a register tile's innermost loop as CGLOW_TILE_LOOP does, in a float matrix product
 * whose epilogue is plain arithmetic or exp (kernels/kernel.py tile_loop): clang is told to unroll it completely,
 * so that the tile's accumulators become registers and its straight-line code is vectorized. Left to itself in a
 * large kernel, clang vectorized the loops instead and kept the accumulators in memory, a load and a store around
 * each multiply-add (MobileNetV2, clang 14 -O3 -march=native on a Zen 4: 11.0 ms, 7.6 with the pragma; gcc 7.4).
 * Not where the epilogue calls erf or tanh (GELU, a recurrent cell): unrolled, clang left those scalar (the
 * transformer 0.60 ms -> 1.34). */
#if defined(__clang__)
#define CGLOW_TILE_UNROLL _Pragma("clang loop unroll(full)")
#else
#define CGLOW_TILE_UNROLL CGLOW_TILE_LOOP
#endif
