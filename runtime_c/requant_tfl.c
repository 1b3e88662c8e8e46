/* TFLite's requantization of an accumulator: its fixed-point product (cglow_scale_tfl) plus the output's zero
   point, clamped to [lo, hi] (the fused activation's range). */
static int32_t cglow_requant_tfl(int32_t acc, int32_t multiplier, int32_t shift, int32_t zero, int32_t lo,
                                 int32_t hi)
{
    return cglow_clamp(cglow_scale_tfl(acc, multiplier, shift) + zero, lo, hi);
}
