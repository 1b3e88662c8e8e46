/* A float literal as a cglow_half (CGLOW_HALF): rounded to float16 where that is the compiler's half type (at
   compile time, to nearest), itself where it is float, as the float32 path has it. */
static cglow_half cglow_half_of(float value)
{
    return (cglow_half)value;
}
