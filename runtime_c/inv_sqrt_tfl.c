/* TFLite's inverse square root of an integer x > 0 as a Q31 multiplier (GetInvSqrtQuantizedMultiplierExp,
   which TFLite's integer layer normalization divides by the standard deviation with): x brought into
   [2^27, 2^29) (cglow_inv_sqrt_exp_tfl's exponent s says how: shifted by 2 (11 - s) bits), halved into a
   Q3.28 value v in [1/4, 1), five Newton-Raphson steps y = 3/2 y - v/2 y^3 from y = 1 in gemmlowp's
   fixed-point products (cglow_high_mul_tfl, each result rescaled to Q3.28 by a saturating shift), times
   sqrt(2)/2; shifted left by -s where s is negative (then the shift is 0). For x <= 1, 2^31 - 1. */
static int32_t cglow_inv_sqrt_tfl(int32_t x)
{
    const int32_t s = cglow_inv_sqrt_exp_tfl(x);
    int32_t half, y = (int32_t)1 << 28, i;
    if (x <= 1) {
        return INT32_MAX;
    }
    x = s <= 11 ? x << 2 * (11 - s) : x >> 2 * (s - 11);
    half = cglow_divide_pot_tfl(x >> 1, 1);
    for (i = 0; i < 5; ++i) {
        const int32_t cube = cglow_times_pot_tfl(cglow_high_mul_tfl(cglow_high_mul_tfl(y, y), y), 6);
        y = cglow_times_pot_tfl(cglow_high_mul_tfl(402653184, y) - cglow_high_mul_tfl(half, cube), 3);
    }
    y = cglow_high_mul_tfl(y, 1518500250);
    return s < 0 ? y * ((int32_t)1 << -s) : y;
}
