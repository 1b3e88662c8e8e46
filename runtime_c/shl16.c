/* gemmlowp's SaturatingRoundingMultiplyByPOT of an int16 value by 2^exponent, exponent >= 0: a left shift that
   saturates to the int16 range. */
static int32_t cglow_shl16(int32_t x, int32_t exponent)
{
    const int32_t threshold = ((int32_t)1 << (15 - exponent)) - 1;
    if (x > threshold) {
        return 32767;
    }
    if (x < -threshold) {
        return -32768;
    }
    return x * ((int32_t)1 << exponent);
}
