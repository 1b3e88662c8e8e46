/* gemmlowp's RoundingHalfSum of two int16 values: (a + b) / 2, halves away from zero. */
static int32_t cglow_half_sum16(int32_t a, int32_t b)
{
    const int32_t sum = a + b;
    return cglow_wrap16((sum + (sum >= 0 ? 1 : -1)) / 2);
}
