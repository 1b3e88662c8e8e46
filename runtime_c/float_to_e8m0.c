/* A float as a float8 E8M0 value (a power of two, its biased exponent), as onnx's reference Cast converts it:
   the float's own exponent field (its sign ignored), rounded by `mode`, a literal: 0 up (any fraction takes the
   next power), 1 down, 2 nearest (ties up); with `saturate`, never rounded up past 2^127, else to 0xff (NaN);
   infinities and NaN give 0xff. Storage of float8e8m0 tensors (graph/stored_types.py). */
static uint8_t cglow_float_to_e8m0(float value, int32_t mode, int32_t saturate)
{
    uint32_t bits;
    memcpy(&bits, &value, 4);
    const uint32_t exponent = (bits >> 23) & 0xffu, fraction = bits & 0x7fffffu;
    uint32_t up;
    if (exponent == 0xffu) {
        return 0xffu;
    }
    if (mode == 0) {
        up = fraction != 0u;
    } else if (mode == 1) {
        up = 0u;
    } else {  /* the first bit dropped set, and the rest or the exponent (not a subnormal's) nonzero */
        up = (fraction & 0x400000u) != 0u && ((fraction & 0x3fffffu) != 0u || exponent != 0u);
    }
    if (saturate && exponent == 0xfeu) {
        up = 0u;
    }
    return (uint8_t)(exponent + up);
}
