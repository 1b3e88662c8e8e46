/* gemmlowp's tanh of an int16 value in Q(integer_bits), as Q0.15: (1 - e^-2|a|) / (1 + e^-2|a|), its sign a's.
   TFLite's 8-bit LSTM: the cell gate (ApplyTanh, Q3.12 in) and the cell state (Q(15 + its scale's exponent)). */
static int32_t cglow_tanh16(int32_t a, int32_t integer_bits)
{
    const int32_t negative = a < 0 ? a : cglow_wrap16(-a);
    const int32_t exp = cglow_exp16(negative, integer_bits + 1); /* e^(2 negative) */
    const int32_t t = cglow_shl16(cglow_wrap16(cglow_newton16(cglow_half_sum16(exp, 32767)) - 8192), 2);
    if (a == 0) {
        return 0;
    }
    return a < 0 ? cglow_wrap16(-t) : t;
}
