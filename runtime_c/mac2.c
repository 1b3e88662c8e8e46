/* Two lanes' multiply-accumulates, acc[0] += (x_h + offset) * w_h and acc[1] += (x_h2 + offset) * w_h2 for the
 * lanes h = half and h2 = half + 2: x and w are four consecutive int8 read as one word (memcpy; an uint8 input
 * is read with each byte's top bit flipped, as for cglow_dot4), lane i the i-th byte in memory. A depthwise
 * convolution keeps one lane per channel, and sums a tile of four channels as two of two, its even lanes and
 * then its odd ones: half the accumulators at a time, so that they stay in registers. With the Arm DSP
 * extension on a little-endian core, x and w are unpacked to 16-bit pairs (SXTAB16 adding the offset, SXTB16;
 * bytes 0 and 2, or 1 and 3 through a rotation) and each lane is one 16 x 16 multiply-accumulate of a half
 * (SMLABB, SMLATT): four instructions for two MACs, the unpacks shared by a register tile. Elsewhere it is
 * plain C. clang sinks each accumulator's multiply-accumulates to where the tile's sums are stored, so that
 * every row's unpacked words are live at once, and spills them; as volatile asm they stay in the kernel's
 * order, as gcc keeps them (int8 kws under clang 14, estimated Cortex-M4 cycles per MAC: 1.92 -> 1.79). */
static void cglow_mac2(int32_t *acc, uint32_t x, uint32_t w, int32_t offset, int32_t half)
{
#if CGLOW_DSP
    const uint32_t pairs = ((uint32_t)offset & 0xffffu) * 0x10001u;
    uint32_t xh, wh;
    if (half) {
        __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(xh) : "r"(pairs), "r"(x));
        __asm__("sxtb16 %0, %1, ror #8" : "=r"(wh) : "r"(w));
    } else {
        xh = __sxtab16(pairs, x);
        wh = __sxtb16(w);
    }
#if defined(__clang__)
    __asm__ volatile("smlabb %0, %1, %2, %0" : "+r"(acc[0]) : "r"(xh), "r"(wh));
    __asm__ volatile("smlatt %0, %1, %2, %0" : "+r"(acc[1]) : "r"(xh), "r"(wh));
#else
    acc[0] = __smlabb((int32_t)xh, (int32_t)wh, acc[0]);
    acc[1] = __smlatt((int32_t)xh, (int32_t)wh, acc[1]);
#endif
#else
    int8_t a[4], b[4];
    memcpy(a, &x, 4);
    memcpy(b, &w, 4);
    acc[0] += (a[half] + offset) * b[half];
    acc[1] += (a[half + 2] + offset) * b[half + 2];
#endif
}
