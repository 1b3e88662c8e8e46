/* QuantizeLinear of one float: round(x) half to even plus the zero point, saturated to [lo, hi]; NaN gives lo.
   x is clamped first, to the reals whose rounding lands in [lo, hi] less the zero point, and then rounded by
   adding and subtracting 1.5 * 2^23: for |x| < 2^22 the sum is rounded to an integer, halves to even, in the
   default rounding mode, where float arithmetic is float (FLT_EVAL_METHOD 0). That is rintf's result without
   its call (picolibc's takes about 140 cycles on a Cortex-M4); elsewhere rintf itself. */
static int32_t cglow_quantize(float x, int32_t zero, int32_t lo, int32_t hi)
{
    if (!(x >= (float)(lo - zero))) {
        return lo;
    }
    if (x >= (float)(hi - zero)) {
        return hi;
    }
#if defined(__FLT_EVAL_METHOD__) && __FLT_EVAL_METHOD__ == 0
    return (int32_t)((x + 12582912.0f) - 12582912.0f) + zero;
#else
    return (int32_t)rintf(x) + zero;
#endif
}
