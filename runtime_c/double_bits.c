/* A double's bits as an unsigned integer, for BitCast of float64 tensors (stored as double, never computed in:
   memcpy, the one conversion C99 defines). */
static uint64_t cglow_double_bits(double value)
{
    uint64_t bits;
    memcpy(&bits, &value, 8);
    return bits;
}
