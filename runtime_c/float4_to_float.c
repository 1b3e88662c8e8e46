/* A float4 E2M1 value, its bits in a byte's low 4 bits, as a float (exact): a sign, 2 exponent bits (bias 1)
   and 1 mantissa bit; no infinity, no NaN; the values 0, 0.5, 1, 1.5, 2, 3, 4, 6. Storage of float4 tensors
   (graph/stored_types.py). */
static float cglow_float4_to_float(uint8_t code)
{
    const uint32_t exponent = (code >> 1) & 3u, mantissa = code & 1u;
    uint32_t bits = ((exponent + 126u) << 23) | (mantissa << 22);
    float value;
    memcpy(&value, &bits, 4);
    if (exponent == 0u) {
        value = 0.5f * (float)mantissa;  /* the subnormal 0.5, or zero */
    }
    return (code & 8u) ? -value : value;
}
