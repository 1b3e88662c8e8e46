/* A cglow_half (CGLOW_HALF) stored as float16 bits: as they are where it is the compiler's half type; rounded to
   nearest, ties to even, where it is float. */
static uint16_t cglow_half_store(cglow_half value)
{
#if CGLOW_HALF
    uint16_t bits;
    (void)cglow_float_to_half;  /* the float branch's conversion, which other maps may call */
    memcpy(&bits, &value, 2);
    return bits;
#else
    return cglow_float_to_half(value);
#endif
}
