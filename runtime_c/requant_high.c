/* cglow_requant where the compiler has shown that every shift is above 32, that no accumulator the kernel can
   reach is exactly halfway between two results, and that the doubled zero point plus one, times 2^pre, stays
   below 2^30 in magnitude (lower/ops/quant.py), given `pre` = shift - 33: the product's high word floor-divided
   by 2^pre is the product over 2^(shift - 1), floored; one more, halved and floored, is the result rounded
   (halves up, never reached). The zero point, doubled, joins the one before the halving (exact: an even
   number), and both join the high word before one shift by pre + 1 (floor((floor(h / 2^p) + c) / 2) =
   floor((h + c 2^p) / 2^(p + 1)); |h| <= 2^30 so the sum fits); on Arm DSP targets the shift then folds into
   the saturation (SSAT with a shift): on a Cortex-M4, one multiply and two more instructions. */
static int32_t cglow_requant_high(int32_t acc, int32_t multiplier, int32_t pre, int32_t zero, int32_t lo,
                                  int32_t hi)
{
    const int64_t product = (int64_t)acc * multiplier;
    const int32_t high = (int32_t)(product < 0 ? ~(~product >> 32) : product >> 32);
    const int32_t halves = high + (1 + 2 * zero) * ((int32_t)1 << pre);
    return cglow_clamp(halves < 0 ? ~(~halves >> (pre + 1)) : halves >> (pre + 1), lo, hi);
}
