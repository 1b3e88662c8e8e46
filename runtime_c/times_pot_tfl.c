/* gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent: x * 2^exponent, saturated to int32 once
   |x| passes 2^(31 - exponent) - 1. */
static int32_t cglow_times_pot_tfl(int32_t x, int32_t exponent)
{
    const int32_t threshold = (int32_t)(((int64_t)1 << (31 - exponent)) - 1);
    if (x > threshold) {
        return INT32_MAX;
    }
    if (x < -threshold) {
        return INT32_MIN;
    }
    return x * ((int32_t)1 << exponent);
}
