/* Four 8-bit input values widened to 16 bits for cglow_dot2, with their offset (minus the zero point) added:
 * x is four consecutive int8 read as one word (memcpy; an uint8 input read with each byte's top bit flipped,
 * its offset 128 more, as for cglow_dot4), byte i value i. panel[0] holds values 0 and 2 (low and high half),
 * panel[1] values 1 and 3: what SXTAB16 makes of x and of x rotated by a byte, two instructions with the
 * Arm DSP extension. The halves are arithmetic (low = bits 0-15), so the plain C elsewhere writes the same
 * words. |value + offset| <= 255 fits a half. */
static void cglow_widen4(int32_t *panel, uint32_t x, int32_t offset)
{
#if CGLOW_DSP
    const uint32_t pairs = ((uint32_t)offset & 0xffffu) * 0x10001u;
    uint32_t x13;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(x13) : "r"(pairs), "r"(x));
    panel[0] = (int32_t)__sxtab16(pairs, x);
    panel[1] = (int32_t)x13;
#else
    int8_t b[4];
    memcpy(b, &x, 4);
    panel[0] = (int32_t)(((uint32_t)(b[0] + offset) & 0xffffu) | ((uint32_t)(b[2] + offset) & 0xffffu) << 16);
    panel[1] = (int32_t)(((uint32_t)(b[1] + offset) & 0xffffu) | ((uint32_t)(b[3] + offset) & 0xffffu) << 16);
#endif
}
