/* A float rounded to the nearest IEEE binary16 value (ties to even), its bits: above the largest half less
   half a step, infinity; NaN stays a quiet NaN. Storage of float16 tensors (graph/stored_types.py). */
static uint16_t cglow_float_to_half(float value)
{
#if defined(__ARM_FP16_FORMAT_IEEE) && defined(__ARM_FP)
    /* an Arm target with a floating-point unit whose compiler takes __fp16 as an IEEE half (runtime_c/half_to_float.c):
       one instruction where the unit converts halves, rounding to nearest (its default mode), the same bits (a NaN's
       payload aside) */
    const __fp16 stored = (__fp16)value;
    uint16_t half;
    memcpy(&half, &stored, 2);
    return half;
#else
    uint32_t bits;
    memcpy(&bits, &value, 4);
    const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    const uint32_t magnitude = bits & 0x7fffffffu;
    uint32_t half, rest, mid, shift;
    if (magnitude > 0x7f800000u) {
        return (uint16_t)(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    }
    if (magnitude >= 0x477ff000u) {  /* 65520 and up, infinity: beyond the largest half, 65504 */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (magnitude >= 0x38800000u) {  /* a normal half: the exponent rebiased, 13 bits rounded off */
        half = (magnitude - 0x38000000u) >> 13;
        rest = magnitude & 0x1fffu;
        mid = 0x1000u;
    } else if (magnitude >= 0x33000000u) {  /* a subnormal half, from 2^-25: the mantissa shifted to 2^-24 steps */
        shift = 126u - (magnitude >> 23);
        half = ((magnitude & 0x7fffffu) | 0x800000u) >> shift;
        rest = ((magnitude & 0x7fffffu) | 0x800000u) & ((1u << shift) - 1u);
        mid = 1u << (shift - 1u);
    } else {
        return sign;
    }
    if (rest > mid || (rest == mid && (half & 1u))) {
        ++half;  /* a carry out of the mantissa steps the exponent, as it should */
    }
    return (uint16_t)(sign | half);
#endif
}
