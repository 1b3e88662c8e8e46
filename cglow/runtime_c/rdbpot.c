/* gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded to nearest, halves away from zero; the floor of a
   negative x is taken without shifting it (implementation-defined in C99). */
static int32_t cglow_rdbpot(int32_t x, int32_t exponent)
{
    const uint32_t mask = ((uint32_t)1 << exponent) - 1u;
    const uint32_t remainder = (uint32_t)x & mask;
    const uint32_t threshold = (mask >> 1) + (x < 0 ? 1u : 0u);
    return (x < 0 ? ~(~x >> exponent) : x >> exponent) + (remainder > threshold ? 1 : 0);
}
