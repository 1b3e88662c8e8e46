/* A cglow_half (the type of cglow_half_load(), which comes first) stored as float16 bits: as they are where it is
   the compiler's half type; rounded to nearest, ties to even, where it is float. */
#if defined(__ARM_FEATURE_FP16_SCALAR_ARITHMETIC)
static uint16_t cglow_half_store(cglow_half value)
{
    uint16_t bits;
    (void)cglow_float_to_half;  /* the other branch's conversion, which other maps may still call */
    memcpy(&bits, &value, 2);
    return bits;
}
#else
static uint16_t cglow_half_store(cglow_half value)
{
    return cglow_float_to_half(value);
}
#endif
