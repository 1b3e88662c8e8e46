/* A cglow_half (CGLOW_HALF) rounded to float16, as each op's result is: itself where it is the compiler's half
   type, whose every operation rounds; through the bits where it is float. */
static cglow_half cglow_half_round(cglow_half value)
{
#if CGLOW_HALF
    (void)cglow_half_to_float;  /* the float branch's conversions, which other maps may call */
    (void)cglow_float_to_half;
    return value;
#else
    return cglow_half_to_float(cglow_float_to_half(value));
#endif
}
