/* A float8 value, its bits, as a float (exact). `format`, a literal: 0 E4M3FN, 1 E4M3FNUZ, 2 E5M2, 3 E5M2FNUZ
   (their mantissa widths 3, 3, 2, 2 and exponent biases 7, 8, 15, 16); the FNUZ formats' only NaN is 0x80,
   E4M3FN's are 0x7f and 0xff, E5M2 has infinities. Storage of float8 tensors (graph/stored_types.py). */
static float cglow_float8_to_float(uint8_t code, int32_t format)
{
    const uint32_t m = format < 2 ? 3u : 2u;
    const int32_t bias = format == 0 ? 7 : format == 1 ? 8 : format == 2 ? 15 : 16;
    const uint32_t magnitude = code & 0x7fu, exponent = magnitude >> m, mantissa = magnitude & ((1u << m) - 1u);
    const uint32_t sign = (uint32_t)(code & 0x80u) << 24;
    uint32_t bits;
    float value;
    if ((format & 1) ? code == 0x80u : format == 0 ? magnitude == 0x7fu : exponent == 0x1fu) {
        bits = format == 2 && mantissa == 0u ? 0x7f800000u : 0x7fc00000u;
    } else if (exponent == 0u) {  /* a subnormal: mantissa steps of 2^(1 - bias - m) */
        bits = (uint32_t)(128 - bias - (int32_t)m) << 23;
        memcpy(&value, &bits, 4);
        value *= (float)mantissa;
        return sign ? -value : value;
    } else {
        bits = ((uint32_t)((int32_t)exponent - bias + 127) << 23) | (mantissa << (23u - m));
    }
    bits |= sign;
    memcpy(&value, &bits, 4);
    return value;
}
