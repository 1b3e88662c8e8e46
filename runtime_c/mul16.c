/* gemmlowp's SaturatingRoundingDoublingHighMul of two int16 values: a * b / 2^15 rounded half away from zero
   (nudged, then divided toward zero), -1 * -1 saturating to the largest value. */
static int32_t cglow_mul16(int32_t a, int32_t b)
{
    const int32_t ab = a * b;
    if (a == -32768 && b == -32768) {
        return 32767;
    }
    return cglow_wrap16((ab + (ab >= 0 ? 1 << 14 : 1 - (1 << 14))) / (1 << 15));
}
