/* Requantization with one rounding, halves up (TFLite's fully-connected kernels in LiteRT): zero +
   floor(acc * multiplier / 2^shift + 1/2), clamped to [lo, hi]; the shift from 1 to 62, so the product and
   its rounding term fit in int64. A floor division by a power of two is written without shifting a negative
   number (implementation-defined in C99). cglow_requant_high computes the same where its conditions hold. */
static int32_t cglow_requant_up(int32_t acc, int32_t multiplier, int32_t shift, int32_t zero, int32_t lo, int32_t hi)
{
    const int64_t rounded = (int64_t)acc * multiplier + ((int64_t)1 << (shift - 1));
    const int64_t wide = rounded < 0 ? ~(~rounded >> shift) : rounded >> shift;
    /* beyond +-2^30 the result clamps anyway (zero, lo and hi are 16-bit at most) */
    return cglow_clamp((int32_t)(wide < -(1 << 30) ? -(1 << 30) : wide > (1 << 30) ? (1 << 30) : wide) + zero,
                       lo, hi);
}
