/* A float rounded to the nearest float8 value (ties to even), its bits, as ONNX's Cast (opset 19) gives it:
   `format` as in float8_to_float.c; with `saturate`, infinities and values beyond the largest finite one give
   it, else NaN (E5M2: infinity); the FNUZ formats have no negative zero. Each a literal: the compiler folds
   the format's branches. Storage of float8 tensors (graph/stored_types.py). */
static uint8_t cglow_float_to_float8(float value, int32_t format, int32_t saturate)
{
    const uint32_t m = format < 2 ? 3u : 2u;
    const int32_t bias = format == 0 ? 7 : format == 1 ? 8 : format == 2 ? 15 : 16;
    const int32_t fnuz = format & 1;
    const uint32_t largest = format == 0 ? 0x7eu : format == 2 ? 0x7bu : 0x7fu;
    uint32_t bits, step_bits;
    float magnitude, step, rounded;
    memcpy(&bits, &value, 4);
    const uint32_t sign = (bits >> 24) & 0x80u, absolute = bits & 0x7fffffffu;
    if (absolute > 0x7f800000u) {
        return (uint8_t)(fnuz ? 0x80u : sign | (format == 0 ? 0x7fu : 0x7eu));
    }
    memcpy(&magnitude, &absolute, 4);
    int32_t exponent = (int32_t)(absolute >> 23) - 127;
    if (exponent < 1 - bias) {
        exponent = 1 - bias;  /* the subnormals' step */
    }
    if (exponent > 16) {
        exponent = 16;  /* beyond every format's range: its overflow, below */
    }
    step_bits = (uint32_t)(exponent - (int32_t)m + 127) << 23;
    memcpy(&step, &step_bits, 4);
    /* to a whole number of steps, ties to even: 2^23 added and taken away (float arithmetic in float, as C99
       with FLT_EVAL_METHOD 0, on every target of cglow's: not the x87 FPU) */
    rounded = ((magnitude / step + 8388608.0f) - 8388608.0f) * step;
    if (absolute == 0x7f800000u || rounded > cglow_float8_to_float((uint8_t)largest, format)) {
        if (saturate) {
            return (uint8_t)(sign | largest);
        }
        return (uint8_t)(format == 2 ? sign | 0x7cu : fnuz ? 0x80u : sign | 0x7fu);
    }
    if (rounded == 0.0f) {
        return (uint8_t)(fnuz ? 0u : sign);
    }
    memcpy(&bits, &rounded, 4);
    exponent = (int32_t)(bits >> 23) - 127;
    if (exponent >= 1 - bias) {
        return (uint8_t)(sign | ((uint32_t)(exponent + bias) << m) | ((bits & 0x7fffffu) >> (23u - m)));
    }
    return (uint8_t)(sign | (uint32_t)(rounded / step));  /* a subnormal: its steps, step being the subnormal one */
}
