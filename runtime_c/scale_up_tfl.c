/* TFLite's fixed-point product as its Neon kernels compute it four lanes at a time (MultiplyByQuantizedMultiplier4Rows,
   which LiteRT's x86 build runs through NEON_2_SSE): cglow_scale_tfl's, but for shift < 0 the division by 2^r
   (r = -shift) a rounding shift, halves up. Both roundings nest into one floor,
   floor((P + 2^30 + 2^(30+r)) / 2^(31+r)) with P = x times the multiplier (x first shifted left, wrapping, when
   shift > 0). */
static int32_t cglow_scale_up_tfl(int32_t x, int32_t multiplier, int32_t shift)
{
    const int32_t total = shift < 0 ? 31 - shift : 31;
    const int64_t shifted = shift > 0 ? (int32_t)((uint32_t)x << shift) : x;
    const int64_t sum = shifted * multiplier + ((int64_t)1 << 30) + (shift < 0 ? (int64_t)1 << (30 - shift) : 0);
    return (int32_t)(sum < 0 ? ~(~sum >> total) : sum >> total);
}
