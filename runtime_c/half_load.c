/* A float16 value's bits as a cglow_half (CGLOW_HALF): as they are where it is the compiler's half type; exactly
   converted where it is float. */
static cglow_half cglow_half_load(uint16_t bits)
{
#if CGLOW_HALF
    cglow_half value;
    (void)cglow_half_to_float;  /* the float branch's conversion, which other maps may call */
    memcpy(&value, &bits, 2);
    return value;
#else
    return cglow_half_to_float(bits);
#endif
}
