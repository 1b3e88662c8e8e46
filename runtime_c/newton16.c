/* gemmlowp's Newton-Raphson division for int16 (one_over_one_plus_x_for_x_in_0_1 and its tanh twin): 1 / d as
   Q2.13 for the half denominator d in Q0.15, from 48/17 - 32/17 d and three iterations. */
static int32_t cglow_newton16(int32_t half_denominator)
{
    int32_t x = cglow_wrap16(23130 + cglow_mul16(half_denominator, -15420));
    int32_t i;
    for (i = 0; i < 3; ++i) {
        const int32_t error = cglow_wrap16(8192 - cglow_mul16(half_denominator, x));
        x = cglow_wrap16(x + cglow_shl16(cglow_mul16(x, error), 2));
    }
    return x;
}
