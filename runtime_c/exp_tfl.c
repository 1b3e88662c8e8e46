/* e^x of one element of TFLite's 8-bit softmax, as its reference kernel computes it: diff is the element less
   its row's maximum (at most 0); below diff_min the result is 0, else diff times beta and the input's scale
   becomes a Q5.26 (MultiplyByQuantizedMultiplierGreaterThanOne: shifted left, then the fixed-point product)
   and gemmlowp's exp_on_negative_values gives a Q0.31: a Taylor polynomial around -1/8 on the argument's
   remainder within [-1/4, 0), times exp(-2^k) for each bit k of the rest. */
static int32_t cglow_exp_tfl(int32_t diff, int32_t multiplier, int32_t shift, int32_t diff_min)
{
    static const int32_t factors[7] = {1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242};
    const int32_t quarter = (int32_t)1 << 24;
    int32_t a, within, x, x2, x3, x4, terms, result, rest, k;
    if (diff < diff_min) {
        return 0;
    }
    a = cglow_high_mul_tfl((int32_t)((uint32_t)diff << shift), multiplier);
    if (a == 0) {
        return INT32_MAX;
    }
    within = (int32_t)((uint32_t)a & (uint32_t)(quarter - 1)) - quarter;
    x = within * 32 + ((int32_t)1 << 28);
    x2 = cglow_high_mul_tfl(x, x);
    x3 = cglow_high_mul_tfl(x2, x);
    x4 = cglow_high_mul_tfl(x2, x2);
    terms = cglow_divide_pot_tfl(cglow_high_mul_tfl(cglow_divide_pot_tfl(x4, 2) + x3, 715827883) + x2, 1);
    result = 1895147668 + cglow_high_mul_tfl(1895147668, x + terms);
    rest = within - a;
    for (k = 0; k < 7; k++) {
        if (rest & ((int32_t)1 << (24 + k))) {
            result = cglow_high_mul_tfl(result, factors[k]);
        }
    }
    return result;
}
