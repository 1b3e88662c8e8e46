/* The float whose bits an unsigned integer holds, for BitCast (memcpy: the one conversion C99 defines). */
static float cglow_bits_float(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, 4);
    return value;
}
