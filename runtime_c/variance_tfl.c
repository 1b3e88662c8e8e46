/* The variance of a row of n int16 values in TFLite's integer layer normalization (ApplyLayerNorm): from the
   sum of their squares and their mean times 2^10 (each truncated as the reference truncates: 2^20 / n, then
   (squares 2^20 / n - mean^2) / 2^20, toward zero), in the values' units squared; the guard where that is
   below 1 (a row of equal values). */
static int32_t cglow_variance_tfl(int64_t squares, int32_t mean, int32_t n, int32_t guard)
{
    const int64_t scaled = squares * (((int32_t)1 << 20) / n) - (int64_t)mean * mean;
    const int32_t variance = (int32_t)(scaled / ((int64_t)1 << 20));
    return variance < 1 ? guard : variance;
}
