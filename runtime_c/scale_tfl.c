/* TFLite's fixed-point product (MultiplyByQuantizedMultiplier, as LiteRT's and TFLite Micro's reference
   kernels compute it): x times 2^shift when shift > 0, times the Q31 multiplier with the product's high word
   rounded half up, h = floor((P + 2^30) / 2^31), then for shift < 0 divided by 2^r (r = -shift) rounded half
   away from zero: floor((h + 2^(r-1) - [h < 0]) / 2^r). Two roundings, where cglow_requant rounds once: a
   model from a .tflite file gets its results to the bit. The two floors nest into one,
   floor((P + 2^30 + 2^(30+r) - [h < 0] 2^31) / 2^(31+r)), and [h < 0] may be read as [x < 0] (they differ
   only where h = 0, whose result is 0 either way): on a Cortex-M4 a multiply-accumulate of the constants and
   a shift of the high word. x shifted left wraps as the reference's int32 arithmetic does; the multiplier is
   below 2^31, so every sum fits in int64. A division by a power of two is written without shifting a
   negative number (implementation-defined in C99). */
static int32_t cglow_scale_tfl(int32_t x, int32_t multiplier, int32_t shift)
{
    int32_t total;
    int64_t sum;
    if (shift < 0) {
        total = 31 - shift;
        sum = (int64_t)x * multiplier + ((int64_t)1 << 30) + ((int64_t)1 << (total - 1)) - ((int64_t)(x < 0) << 31);
    } else {
        total = 31;
        sum = (int64_t)(int32_t)((uint32_t)x << shift) * multiplier + ((int64_t)1 << 30);
    }
    return (int32_t)(sum < 0 ? ~(~sum >> total) : sum >> total);
}
