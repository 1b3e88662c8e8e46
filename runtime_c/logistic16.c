/* gemmlowp's logistic of an int16 value in Q(integer_bits), as Q0.15: 1 / (1 + e^-|a|), mirrored for a < 0,
   1/2 at 0. TFLite's 8-bit LSTM gates (ApplySigmoid, Q3.12 in). */
static int32_t cglow_logistic16(int32_t a, int32_t integer_bits)
{
    const int32_t magnitude = a > 0 ? a : cglow_wrap16(-a);
    const int32_t exp = cglow_exp16(cglow_wrap16(-magnitude), integer_bits);
    const int32_t positive = cglow_shl16(cglow_newton16(cglow_half_sum16(exp, 32767)), 1);
    if (a == 0) {
        return 16384;
    }
    return a > 0 ? positive : cglow_wrap16(32767 - positive);
}
