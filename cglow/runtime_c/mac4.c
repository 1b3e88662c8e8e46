/* Four lanes' multiply-accumulates, acc[i] += (x_i + offset) * w_i: x and w are four consecutive int8 read as
 * one word (memcpy; an uint8 input is read with each byte's top bit flipped, as for cglow_dot4), lane i the
 * i-th byte in memory. Depthwise convolutions keep one lane per channel. With the Arm DSP extension on a
 * little-endian core, x and w are unpacked to 16-bit pairs (SXTAB16 adding the offset, SXTB16; bytes 0 and 2,
 * then 1 and 3 through a rotation) and each lane is one 16 x 16 multiply-accumulate of a half (SMLABB,
 * SMLATT): eight instructions for four MACs, the unpacks shared by a register tile. Elsewhere it is plain C. */
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__) && !defined(__ARM_BIG_ENDIAN)
#include <arm_acle.h>
#define CGLOW_MAC4_DSP 1
#endif
static void cglow_mac4(int32_t *acc, uint32_t x, uint32_t w, int32_t offset)
{
#ifdef CGLOW_MAC4_DSP
    const uint32_t pairs = ((uint32_t)offset & 0xffffu) * 0x10001u;
    const uint32_t x02 = __sxtab16(pairs, x), w02 = __sxtb16(w);
    uint32_t x13, w13;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(x13) : "r"(pairs), "r"(x));
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(w13) : "r"(w));
    acc[0] = __smlabb((int32_t)x02, (int32_t)w02, acc[0]);
    acc[1] = __smlabb((int32_t)x13, (int32_t)w13, acc[1]);
    acc[2] = __smlatt((int32_t)x02, (int32_t)w02, acc[2]);
    acc[3] = __smlatt((int32_t)x13, (int32_t)w13, acc[3]);
#else
    int8_t a[4], b[4];
    int32_t i;
    memcpy(a, &x, 4);
    memcpy(b, &w, 4);
    for (i = 0; i < 4; ++i) {
        acc[i] += (a[i] + offset) * b[i];
    }
#endif
}
