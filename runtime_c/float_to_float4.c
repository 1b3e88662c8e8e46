/* A float rounded to the nearest float4 E2M1 value (ties to even), its bits in a byte's low 4 bits, as ml_dtypes
   converts (onnx's reference Cast): beyond 6, infinities included, 6 (the type has no infinity, so it always
   saturates); NaN, which it cannot hold either, a zero of the other sign. Storage of float4 tensors
   (graph/stored_types.py). */
static uint8_t cglow_float_to_float4(float value)
{
    uint32_t bits, step_bits;
    float magnitude, step, rounded;
    memcpy(&bits, &value, 4);
    const uint32_t sign = (bits >> 28) & 8u, absolute = bits & 0x7fffffffu;
    if (absolute > 0x7f800000u) {
        return (uint8_t)(sign ^ 8u);
    }
    memcpy(&magnitude, &absolute, 4);
    int32_t exponent = (int32_t)(absolute >> 23) - 127;
    exponent = exponent < 0 ? 0 : exponent > 2 ? 2 : exponent;  /* the steps: 0.5 below 2, 1 below 4, then 2 */
    step_bits = (uint32_t)(exponent + 126) << 23;
    memcpy(&step, &step_bits, 4);
    /* to a whole number of steps, ties to even: 2^23 added and taken away (as float_to_float8.c) */
    rounded = ((magnitude / step + 8388608.0f) - 8388608.0f) * step;
    if (rounded >= 6.0f) {
        return (uint8_t)(sign | 7u);
    }
    if (rounded >= 4.0f) {
        return (uint8_t)(sign | 6u);
    }
    return (uint8_t)(sign | (uint32_t)(rounded < 2.0f ? 2.0f * rounded : rounded + 2.0f));
}
