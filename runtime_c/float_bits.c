/* A float's bits as an unsigned integer, for BitCast (memcpy: the one conversion C99 defines). */
static uint32_t cglow_float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, 4);
    return bits;
}
