/* A cglow_half (the type of cglow_half_load(), which comes first) rounded to float16, as each op's result is:
   itself where it is the compiler's half type, whose every operation rounds; where it is float, through the bits. */
static cglow_half cglow_half_round(cglow_half value)
{
#if defined(__ARM_FEATURE_FP16_SCALAR_ARITHMETIC)
    return value;
#else
    return cglow_half_to_float(cglow_float_to_half(value));
#endif
}
