/* gemmlowp's SaturatingRoundingDoublingHighMul, the fixed-point product of TFLite's reference kernels: a * b /
   2^31 rounded half up (the nudged product divided toward zero), INT32_MIN times itself saturating. */
static int32_t cglow_high_mul_tfl(int32_t a, int32_t b)
{
    const int64_t product = (int64_t)a * b;
    const int64_t nudged = product + (product >= 0 ? ((int64_t)1 << 30) : 1 - ((int64_t)1 << 30));
    if (a == INT32_MIN && b == INT32_MIN) {
        return INT32_MAX;
    }
    return (int32_t)(nudged / ((int64_t)1 << 31));
}
