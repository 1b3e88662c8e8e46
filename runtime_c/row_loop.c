/* CGLOW_ROW_LOOP marks a convolution's loop over its kernel rows. On a core without vector registers gcc unrolls
 * it (its trip count, KH, is a literal): each row keeps its bounds test, the loop's own count and branch go.
 * Cortex-M4 estimated cycles per MAC (make bench-mcu), int8 kws / vww 2.16 / 2.24 -> 2.14 / 2.21, float kws 3.17
 * -> 3.14. Not on the 8-bit dot-product rows (kernels/conv_dot.j2): int8 resnet8 1.68 -> 1.63, but 30 KiB more
 * code, over a quarter of its 80 KB of weights. Elsewhere the loop is left to the compiler. */
#if defined(__GNUC__) && !defined(__clang__) && !(defined(__SSE2__) || defined(__ARM_NEON) || defined(__riscv_vector))
#define CGLOW_ROW_LOOP _Pragma("GCC unroll 8")
#else
#define CGLOW_ROW_LOOP
#endif
