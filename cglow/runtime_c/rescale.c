/* The fixed-point sum of two rescaled 8-bit values (quantized Add): zero + acc / 2^shift rounded to nearest,
   halves away from zero, clamped to [lo, hi]; |acc| < 2^31 and 1 <= shift <= 30, so nothing overflows
   and no negative number is shifted. */
static int32_t cglow_rescale(int32_t acc, int32_t shift, int32_t zero, int32_t lo, int32_t hi)
{
    const int32_t half = (int32_t)1 << (shift - 1);
    const int32_t value = (acc >= 0 ? (acc + half) >> shift : -((half - acc) >> shift)) + zero;
    return value < lo ? lo : value > hi ? hi : value;
}
