/* cglow_requant where the compiler has shown that every shift is above 32 and that no accumulator the
   kernel can reach is exactly halfway between two results (lower/ops/quant.py): the rounded result is
   the product's high word plus half of 2^(shift - 32), floor-divided by 2^(shift - 32). On a Cortex-M4,
   one multiply and five more instructions. */
static int32_t cglow_requant_high(int32_t acc, int32_t multiplier, int32_t shift, int32_t zero, int32_t lo,
                                  int32_t hi)
{
    const int64_t product = (int64_t)acc * multiplier;
    const int32_t high = (int32_t)(product < 0 ? ~(~product >> 32) : product >> 32);
    const int32_t rounded = high + ((int32_t)1 << (shift - 33));
    const int32_t value = rounded < 0 ? ~(~rounded >> (shift - 32)) : rounded >> (shift - 32);
    return cglow_clamp(value + zero, lo, hi);
}
