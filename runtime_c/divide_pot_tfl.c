/* gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded half away from zero, for any exponent from 0 to 62
   (in 64 bits, so that one of 32 or more, which TFLite's softmax would refuse, is still defined). Written
   without shifting a negative number (implementation-defined in C99). */
static int32_t cglow_divide_pot_tfl(int32_t x, int32_t exponent)
{
    const int64_t wide = x;
    const int64_t mask = ((int64_t)1 << exponent) - 1;
    const int64_t floor = wide < 0 ? ~(~wide >> exponent) : wide >> exponent;
    return (int32_t)(floor + ((wide & mask) > (mask >> 1) + (x < 0)));
}
