/* The reciprocal of a row's sum in TFLite's 8-bit softmax (GetReciprocal): the sum, a Q12.19 of at least 1,
   is x * 2^(12 - leading zeros) with x in [1, 2), and 1/x comes as a Q0.31 in (1/2, 1] from gemmlowp's
   one_over_one_plus_x_for_x_in_0_1: Newton-Raphson on half the denominator from 48/17 - 32/17 d, three steps,
   in Q2.29. The caller divides by the power of two. */
static int32_t cglow_reciprocal_tfl(int32_t sum)
{
    const int32_t above_one = (int32_t)(((uint32_t)sum << cglow_leading_zeros((uint32_t)sum)) - 0x80000000u);
    const int32_t half = (int32_t)(((int64_t)above_one + INT32_MAX + 1) / 2);
    int32_t r = 1515870810 + cglow_high_mul_tfl(half, -1010580540);
    int32_t i;
    for (i = 0; i < 3; i++) {
        r += cglow_times_pot_tfl(cglow_high_mul_tfl(r, ((int32_t)1 << 29) - cglow_high_mul_tfl(half, r)), 2);
    }
    return cglow_times_pot_tfl(r, 1);
}
