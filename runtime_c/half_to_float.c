/* An IEEE binary16 value, its bits, as a float: exact (a float holds every half), infinities, NaN and
   subnormals kept. Storage of float16 tensors, which compute in float (graph/stored_types.py). */
static float cglow_half_to_float(uint16_t half)
{
#if defined(__ARM_FP16_FORMAT_IEEE) && defined(__ARM_FP)
    /* an Arm target with a floating-point unit whose compiler takes __fp16 as an IEEE half (clang; gcc on Cortex-M55
       and AArch64, elsewhere with -mfp16-format=ieee): one instruction where the unit converts halves (Cortex-M4F,
       M7, M33, M55, AArch64), the same value (a NaN's payload may differ: a signaling one comes out quiet) */
    __fp16 stored;
    memcpy(&stored, &half, 2);
    return (float)stored;
#else
    const uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
    const uint32_t exponent = (uint32_t)(half >> 10) & 0x1fu;
    const uint32_t mantissa = half & 0x3ffu;
    uint32_t bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
    float value;
    if (exponent == 0x1fu) {
        bits = sign | 0x7f800000u | (mantissa << 13);
    } else if (exponent == 0u) {
        value = (float)mantissa * 0x1p-24f;
        return sign ? -value : value;
    }
    memcpy(&value, &bits, 4);
    return value;
#endif
}
