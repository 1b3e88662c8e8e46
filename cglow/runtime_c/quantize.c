/* QuantizeLinear of one float: round(x) half to even (rintf, in the default rounding mode) plus the zero
   point, saturated to [lo, hi]; NaN gives lo. */
static int32_t cglow_quantize(float x, int32_t zero, int32_t lo, int32_t hi)
{
    const float q = rintf(x) + (float)zero;
    return q >= (float)lo ? (q <= (float)hi ? (int32_t)q : hi) : lo;
}
