/* CGLOW_ROW_LOOP marks a convolution's loop over its kernel rows. On a core without vector registers gcc unrolls
 * it (its trip count, KH, is a literal): each row keeps its bounds test, the loop's own count and branch go.
 * Cortex-M4 estimated cycles per MAC (make bench-mcu), int8 kws / vww / resnet8 2.16 / 2.24 / 1.68 -> 2.14 / 2.21 /
 * 1.63, float kws 3.17 -> 3.14. Elsewhere the loop is left to the compiler. */
#if defined(__GNUC__) && !defined(__clang__) && !(defined(__SSE2__) || defined(__ARM_NEON) || defined(__riscv_vector))
#define CGLOW_ROW_LOOP _Pragma("GCC unroll 8")
#else
#define CGLOW_ROW_LOOP
#endif
