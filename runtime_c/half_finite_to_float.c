/* A finite IEEE binary16 value, its bits, as a float, without a branch: its exponent and mantissa put where a
   float's go, 112 below the float's exponent bias, then scaled by 2^112, which is exact (subnormals included:
   they become float subnormals first). Weights stored as float16 (instr/narrow_weights.py), known finite. */
static float cglow_half_finite_to_float(uint16_t half)
{
    const uint32_t bits = (uint32_t)(half & 0x8000u) << 16 | (uint32_t)(half & 0x7fffu) << 13;
    float value;
    memcpy(&value, &bits, 4);
    return value * 0x1p112f;
}
