/* The zero point with which LiteRT's hybrid kernels quantize a float row to int8 asymmetrically
   (AsymmetricQuantizeFloats), from the row's range: lo = min(0, min), hi = max(0, max), lo < hi. Of the two
   candidates, the one from the range's end whose error is smaller, rounded half away from zero, saturated to
   [-128, 127]. LiteRT computes the candidates in double, cglow in float: the two may round apart where the real
   zero point lies within about 2e-5 of a half (a row whose min is minus its max lands on one exactly), and then
   only the row's extreme values quantize one step apart. */
static int32_t cglow_hybrid_zero(float lo, float hi)
{
    const float scale = (hi - lo) / 255.0f;
    const float low = lo / scale;
    const float high = hi / scale;
    return cglow_quantize_tfl(128.0f + fabsf(low) < 127.0f + fabsf(high) ? -128.0f - low : 127.0f - high, 0,
                              -128, 127);
}
