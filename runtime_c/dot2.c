/* acc plus the products of a panel word's two widened input values (its low and high 16-bit halves, as
 * cglow_widen4 writes them) with one channel's two int8 weights in a word w of a channel pair's weights
 * (instr/passes.py pair_weights): bytes `lane` and 2 + lane. With the Arm DSP extension: one unpack (SXTB16,
 * of w rotated by a byte for the second channel) and one dual 16-bit multiply-accumulate (SMLAD), the
 * unpack shared by a tile's rows; the inputs were unpacked once per panel, not once per tile of output
 * channels (cglow_dot4). Elsewhere it is plain C. */
#if defined(__GNUC__)
__attribute__((unused)) /* where every step is the assembly of kernels/arm_steps.py (CGLOW_DSP_ASM) */
#endif
static int32_t cglow_dot2(int32_t acc, int32_t x, uint32_t w, int32_t lane)
{
#if CGLOW_DSP
    if (lane) {
        uint32_t w13;
        __asm__("sxtb16 %0, %1, ror #8" : "=r"(w13) : "r"(w));
        return __smlad((uint32_t)x, w13, acc);
    }
    return __smlad((uint32_t)x, __sxtb16(w), acc);
#else
    int8_t b[4];
    int32_t h;
    memcpy(b, &w, 4);
    for (h = 0; h < 2; ++h) {
        const uint32_t half = ((uint32_t)x >> h * 16) & 0xffffu;
        acc += ((int32_t)(half & 0x7fffu) - (int32_t)(half & 0x8000u)) * b[2 * h + lane];
    }
    return acc;
#endif
}
