/* cglow_requant_tfl where the compiler has shown that every shift is -2 or below (r = -shift >= 2: scales
   below 1/4, as in a convolution), given pre = r - 2: TFLite's two roundings as one floor (scale_tfl.c),
   floor((P + 2^30 - [acc < 0] 2^31 + 2^(30+r)) / 2^(31+r)), taken as the high word of P plus half (+-2^30),
   plus 2^pre, floor-divided by 2^(pre+1). half is formed without a branch (its sign is acc's): on a
   Cortex-M4 three instructions and one multiply-accumulate, then three more before the saturation. */
static int32_t cglow_requant_tfl_high(int32_t acc, int32_t multiplier, int32_t pre, int32_t zero, int32_t lo,
                                      int32_t hi)
{
    const int32_t half = (int32_t)((uint32_t)acc >> 31) * INT32_MIN + ((int32_t)1 << 30);
    const int64_t sum = (int64_t)acc * multiplier + half;
    const int32_t high = (int32_t)(sum < 0 ? ~(~sum >> 32) : sum >> 32) + ((int32_t)1 << pre);
    return cglow_clamp((high < 0 ? ~(~high >> (pre + 1)) : high >> (pre + 1)) + zero, lo, hi);
}
