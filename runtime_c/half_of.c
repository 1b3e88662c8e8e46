/* A float literal that float16 holds exactly (cglow/instr/half_math.py) as a cglow_half (CGLOW_HALF). */
static cglow_half cglow_half_of(float value)
{
    return (cglow_half)value;
}
