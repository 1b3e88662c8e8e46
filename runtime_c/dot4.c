/* acc plus the dot product of four 8-bit lanes, (x + offset) . w: x and w are four consecutive int8 read as
 * one word (memcpy; an uint8 input is read with each byte's top bit flipped, as int8 128 less, its offset
 * 128 more), offset is minus the input's zero point. The lanes' order in the word does not matter: it is the
 * same for x and w. With the Arm DSP extension (Cortex-M4, M7, M33, M55) these are two sign-extending unpacks
 * of x to 16-bit pairs that add the offset (SXTAB16, the second rotated by a byte), two of w (SXTB16) and two
 * dual 16-bit multiply-accumulates (SMLAD); a register tile calling it with one x and several w (and one w and
 * several x) shares the unpacks, which the compilers common away (the intrinsics and the asm are pure). The
 * 16-bit lanes cannot overflow: |x + offset| <= 255. Elsewhere it is plain C. */
#if defined(__GNUC__)
__attribute__((unused)) /* where every step is the assembly of kernels/arm_steps.py (CGLOW_DSP_ASM) */
#endif
static int32_t cglow_dot4(int32_t acc, uint32_t x, uint32_t w, int32_t offset)
{
#if CGLOW_DSP
    const uint32_t pairs = ((uint32_t)offset & 0xffffu) * 0x10001u;
    uint32_t x13, w13;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(x13) : "r"(pairs), "r"(x));
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(w13) : "r"(w));
    acc = __smlad(__sxtab16(pairs, x), __sxtb16(w), acc);
    return __smlad(x13, w13, acc);
#else
    int32_t k;
    for (k = 0; k < 32; k += 8) {
        const int32_t a = (int32_t)(((x >> k) & 0xffu) ^ 0x80u) - 128;
        const int32_t b = (int32_t)(((w >> k) & 0xffu) ^ 0x80u) - 128;
        acc += (a + offset) * b;
    }
    return acc;
#endif
}
