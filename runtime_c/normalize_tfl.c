/* One value x of TFLite's integer layer normalization (ApplyLayerNorm) before its requantization: x 2^10 less
   the row's mean (times 2^10), times the row's inverse standard deviation (multiplier and shift, TFLite's
   fixed-point product), times the coefficient plus the bias, in 32 bits that wrap as the reference's int
   arithmetic does, divided by 2^10 rounding half away from zero. */
static int32_t cglow_normalize_tfl(int32_t x, int32_t mean, int32_t multiplier, int32_t shift, int32_t coefficient,
                                   int32_t bias)
{
    const int32_t rescaled = cglow_scale_tfl(x * 1024 - mean, multiplier, shift);
    const int64_t weighted = (int32_t)((uint32_t)rescaled * (uint32_t)coefficient + (uint32_t)bias);
    return (int32_t)((weighted > 0 ? weighted + 512 : weighted - 512) / 1024);
}
