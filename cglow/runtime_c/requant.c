/* Requantization of an integer accumulator: zero + acc * multiplier / 2^shift rounded to nearest, halves to
   even (as QuantizeLinear rounds), clamped to [lo, hi]. The multiplier is below 2^31 and the shift from 1 to
   62, so the product and its rounding term fit in int64. The division by 2^shift is a floor written without
   shifting a negative number (implementation-defined in C99); compilers emit one arithmetic shift for it. */
static int32_t cglow_requant(int32_t acc, int32_t multiplier, int32_t shift, int32_t zero, int32_t lo, int32_t hi)
{
    const int64_t one = (int64_t)1 << shift;
    const int64_t scaled = (int64_t)acc * multiplier + (one >> 1);
    int64_t value = scaled < 0 ? ~(~scaled >> shift) : scaled >> shift;
    if ((scaled & (one - 1)) == 0) {  /* exactly halfway before the rounding term: to even */
        value -= value & 1;
    }
    value += zero;
    return (int32_t)(value < lo ? lo : value > hi ? hi : value);
}
