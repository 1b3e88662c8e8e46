/* Requantization of an integer accumulator: zero + acc * multiplier / 2^shift rounded to nearest, halves to
   even (as QuantizeLinear rounds), clamped to [lo, hi]. The multiplier is below 2^31 and the shift from 1 to
   62, so the product and its rounding term fit in int64. A floor division by a power of two is written
   without shifting a negative number (implementation-defined in C99); compilers emit one arithmetic shift.
   With a shift above 32 (scales below 1/4, as in a convolution or a matrix product), only the product's high
   word moves the floor and its low word only tells a tie: 32-bit arithmetic after one 32 x 32 -> 64
   multiply (on a Cortex-M4, about 15 instructions where the 64-bit rounding and shift take 45). */
static int32_t cglow_requant(int32_t acc, int32_t multiplier, int32_t shift, int32_t zero, int32_t lo, int32_t hi)
{
    const int64_t product = (int64_t)acc * multiplier;
    int32_t value;
    if (shift > 32) {
        const int32_t high = (int32_t)(product < 0 ? ~(~product >> 32) : product >> 32);
        const int32_t half = (int32_t)1 << (shift - 33);
        const int32_t rounded = high + half;
        value = rounded < 0 ? ~(~rounded >> (shift - 32)) : rounded >> (shift - 32);
        if ((uint32_t)product == 0 && (high & (2 * half - 1)) == half) {  /* exactly halfway: to even */
            value -= value & 1;
        }
    } else {
        const int64_t one = (int64_t)1 << shift;
        const int64_t scaled = product + (one >> 1);
        int64_t wide = scaled < 0 ? ~(~scaled >> shift) : scaled >> shift;
        if ((scaled & (one - 1)) == 0) {
            wide -= wide & 1;
        }
        /* beyond +-2^30 the result clamps anyway (zero, lo and hi are 16-bit at most) */
        value = (int32_t)(wide < -(1 << 30) ? -(1 << 30) : wide > (1 << 30) ? (1 << 30) : wide);
    }
    return cglow_clamp(value + zero, lo, hi);
}
