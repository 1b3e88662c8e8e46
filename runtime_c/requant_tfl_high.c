/* cglow_requant_tfl where the compiler has shown that no accumulator the kernel can reach is 2^30 or more in
   magnitude, that every multiplier M is 2^30 or more (TFLite's are, but for a zero scale), that every shift
   is -1 or below (r = -shift >= 1: scales below 1/2, as in a convolution) and that the zero point's term
   below stays under 2^29 in magnitude (so h plus it fits an int32); given each multiplier as 2M - 2^32 (an
   int32: -2^31 up to -2) and shift = r. TFLite's first rounding, h = floor((acc M + 2^30) / 2^31), is the
   high word of acc (2M - 2^32) + acc 2^32 rounded half up: one SMMLAR on Arm's DSP extension. The second, the
   division by 2^r rounded half away from zero, takes the zero point along: floor((h - [acc < 0] + (1 + 2 zero)
   2^(r-1)) / 2^r) is the rounded quotient plus zero ([acc < 0] differs from [h < 0] only where h = 0, whose
   quotient is 0 either way). On a Cortex-M4 the multiply-accumulate, two instructions, a shift and the
   saturation. */
static int32_t cglow_requant_tfl_high(int32_t acc, int32_t multiplier, int32_t shift, int32_t zero, int32_t lo,
                                      int32_t hi)
{
    int32_t high;
#if CGLOW_DSP
    __asm__("smmlar %0, %1, %2, %1" : "=r"(high) : "r"(acc), "r"(multiplier));
#else
    const int64_t sum = (int64_t)acc * (int64_t)((uint32_t)multiplier >> 1) + ((int64_t)1 << 30);
    high = (int32_t)(sum < 0 ? ~(~sum >> 31) : sum >> 31);
#endif
    high += (1 + 2 * zero) * ((int32_t)1 << (shift - 1)) - (int32_t)((uint32_t)acc >> 31);
    return cglow_clamp(high < 0 ? ~(~high >> shift) : high >> shift, lo, hi);
}
