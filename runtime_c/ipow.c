/* base raised to exponent, exactly, in 64-bit integers (wrapping modulo 2^64 like unsigned arithmetic).
 * A negative exponent gives the truncated fraction 1 / base^-exponent, as onnxruntime's integer Pow. */
static int64_t cglow_ipow(int64_t base, int64_t exponent)
{
    uint64_t result = 1u;
    uint64_t factor = (uint64_t)base;
    if (exponent < 0) {
        if (base == 1 || (base == -1 && exponent % 2 == 0)) {
            return 1;
        }
        return base == -1 ? -1 : 0;
    }
    while (exponent > 0) {
        if (exponent & 1) {
            result *= factor;
        }
        factor *= factor;
        exponent >>= 1;
    }
    return (int64_t)result;
}
