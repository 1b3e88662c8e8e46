/* a * b + c for the kernels' multiply-accumulate: one fused instruction where fmaf is fast (x86 with FMA,
 * AArch64, Cortex-M4F/M7), a plain multiply and add everywhere else (a library fmaf would be slow there).
 * <math.h> says so with FP_FAST_FMAF, or the compiler with __FP_FAST_FMAF where the C library does not
 * (picolibc and newlib for Cortex-M: with -std=c99, gcc does not contract a * b + c, so the Cortex-M4F ran
 * a multiply and an add, 3.7 instructions per multiply-accumulate on kws where fused ones take 2.7). */
static float cglow_fma(float a, float b, float c)
{
#if defined(FP_FAST_FMAF) || defined(__FP_FAST_FMAF)
    return fmaf(a, b, c);
#else
    return a * b + c;
#endif
}
