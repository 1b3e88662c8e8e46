/* A float rounded to the nearest bfloat16 value (ties to even), its bits; NaN stays a quiet NaN. Storage of
   bfloat16 tensors (graph/stored_types.py). */
static uint16_t cglow_float_to_bfloat(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((bits >> 16) | 0x40u);
    }
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}
