/* A float8 E8M0 value (an exponent alone: 2^(code - 127); 0xff is NaN), its bits, as a float (exact; 2^-127 is a
   float subnormal). Storage of float8e8m0 tensors, the scales of microscaling formats (graph/stored_types.py). */
static float cglow_e8m0_to_float(uint8_t code)
{
    const uint32_t bits = code == 0xffu ? 0x7fc00000u : code == 0u ? 0x00400000u : (uint32_t)code << 23;
    float value;
    memcpy(&value, &bits, 4);
    return value;
}
