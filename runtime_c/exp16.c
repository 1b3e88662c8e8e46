/* gemmlowp's exp_on_negative_values for int16: e^a for a <= 0 held in Q(integer_bits) (15 - integer_bits
   fractional bits), as Q0.15: e^(a mod 1/4 - 1/4) by its Taylor expansion around -1/8, times e^-(2^k) for each
   bit k of the rest, and 1 for a = 0. The constants are gemmlowp's int32 ones rounded to 16 bits, as its
   RescaleConstantInitializer gives them. TFLite's 8-bit LSTM takes its gates' logistic and tanh from it. */
static int32_t cglow_exp16(int32_t a, int32_t integer_bits)
{
    static const int32_t multipliers[7] = {25520, 19875, 12055, 4435, 600, 11, 0}; /* e^-(2^k), k = -2..4 */
    const int32_t fractional_bits = 15 - integer_bits;
    const int32_t quarter = (int32_t)1 << (fractional_bits - 2);
    const int32_t reduced = cglow_wrap16((int32_t)((uint32_t)a & (uint32_t)(quarter - 1)) - quarter);
    const int32_t x = cglow_wrap16(cglow_shl16(reduced, integer_bits) + 4096); /* around -1/8 */
    const int32_t x2 = cglow_mul16(x, x);
    const int32_t x3 = cglow_mul16(x2, x);
    const int32_t x4 = cglow_mul16(x2, x2);
    const int32_t cubic = cglow_wrap16(cglow_divide_pot_tfl(x4, 2) + x3); /* x^4 / 4 + x^3, times 1/3 below */
    const int32_t series = cglow_divide_pot_tfl(cglow_wrap16(cglow_mul16(cubic, 10923) + x2), 1);
    const int32_t remainder = cglow_wrap16(reduced - a);
    int32_t result = cglow_mul16(28918, cglow_wrap16(x + series)) + 28918; /* e^-1/8 (1 + ...), saturated */
    int32_t k;
    result = result > 32767 ? 32767 : result;
    for (k = -2; k <= 4; ++k) {
        if (integer_bits > k && (remainder & ((int32_t)1 << (fractional_bits + k))) != 0) {
            result = cglow_mul16(result, multipliers[k + 2]);
        }
    }
    if (integer_bits > 5 && a < -((int32_t)1 << (20 - integer_bits))) { /* below -32: 0 */
        result = 0;
    }
    return a == 0 ? 32767 : result;
}
