/* The exponent of TFLite's inverse square root of an integer x (GetInvSqrtQuantizedMultiplierExp): x is
   brought into [2^27, 2^29) by k divisions by 4 (from 2^29 up) or p left shifts by two bits, and 1/sqrt(x)
   is the multiplier (cglow_inv_sqrt_tfl) times 2^(s - 31) with s = 11 + k - p; 0 for x <= 1, whose
   multiplier is 2^31 - 1 unshifted. */
static int32_t cglow_inv_sqrt_exp_tfl(int32_t x)
{
    int32_t s = 11;
    if (x <= 1) {
        return 0;
    }
    for (; x >= (int32_t)1 << 29; x /= 4) {
        ++s;
    }
    return s - ((cglow_leading_zeros((uint32_t)x) - 1) / 2 - 1);
}
