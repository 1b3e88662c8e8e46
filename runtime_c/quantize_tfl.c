/* TFLite's QUANTIZE of one float: x (the value divided by the scale, in float) rounded half away from zero,
   as std::round does, plus the zero point, saturated to [lo, hi]; NaN gives lo. x is clamped first, to the
   reals whose rounding lands in [lo, hi] less the zero point; then x less its integer part (exact in float)
   tells the rounding. */
static int32_t cglow_quantize_tfl(float x, int32_t zero, int32_t lo, int32_t hi)
{
    int32_t whole;
    float rest;
    if (!(x >= (float)(lo - zero))) {
        return lo;
    }
    if (x >= (float)(hi - zero)) {
        return hi;
    }
    whole = (int32_t)x;
    rest = x - (float)whole;
    return whole + (rest >= 0.5f) - (rest <= -0.5f) + zero;
}
