/* TFLite's fixed-point product (MultiplyByQuantizedMultiplier, as LiteRT's and TFLite Micro's reference
   kernels compute it): x times 2^shift when shift > 0, times the Q31 multiplier with the high word rounded
   half up, then divided by 2^-shift when shift < 0, rounded half away from zero. Two roundings, where
   cglow_requant rounds once: a model from a .tflite file gets its results to the bit. x shifted left wraps
   as the reference's int32 arithmetic does; the multiplier is below 2^31, so the product fits in int64. A
   division by a power of two is written without shifting a negative number (implementation-defined in C99). */
static int32_t cglow_scale_tfl(int32_t x, int32_t multiplier, int32_t shift)
{
    const int32_t left = shift > 0 ? shift : 0;
    const int32_t right = shift > 0 ? 0 : -shift;
    const int64_t product = (int64_t)(int32_t)((uint32_t)x << left) * multiplier;
    const int64_t nudged = product + (product >= 0 ? ((int64_t)1 << 30) : 1 - ((int64_t)1 << 30));
    const int32_t high = (int32_t)(nudged / ((int64_t)1 << 31));
    const int32_t mask = (int32_t)(((int64_t)1 << right) - 1);
    const int32_t floor = high < 0 ? ~(~high >> right) : high >> right;
    return floor + ((high & mask) > (mask >> 1) + (high < 0));
}
