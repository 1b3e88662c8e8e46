/* acc plus the dot product of four widened input values (two int32 words of a panel, as cglow_widen4 writes
 * them: values 0 and 2, then 1 and 3, as low and high 16-bit halves) with four int8 weights w (one word read
 * with memcpy, byte i weighting value i). With the Arm DSP extension: two unpacks of w (SXTB16, the second
 * rotated by a byte) and two dual 16-bit multiply-accumulates (SMLAD), the inputs' unpacking done once per
 * panel instead of once per tile of output channels (cglow_dot4). Elsewhere it is plain C. */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
#include <arm_acle.h>
#endif
#if defined(__GNUC__)
__attribute__((unused)) /* where every step is the assembly of kernels/arm_steps.py (CGLOW_DSP_ASM) */
#endif
static int32_t cglow_dot16(int32_t acc, const int32_t *panel, uint32_t w)
{
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
    uint32_t w13;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(w13) : "r"(w));
    acc = __smlad((uint32_t)panel[0], __sxtb16(w), acc);
    return __smlad((uint32_t)panel[1], w13, acc);
#else
    int8_t b[4];
    int32_t k;
    memcpy(b, &w, 4);
    for (k = 0; k < 4; ++k) {
        const uint32_t half = ((uint32_t)panel[k & 1] >> (k & 2) * 8) & 0xffffu;
        acc += ((int32_t)(half & 0x7fffu) - (int32_t)(half & 0x8000u)) * b[k];
    }
    return acc;
#endif
}
