/* The double whose bits an unsigned integer holds, for BitCast to float64 tensors (stored as double, never
   computed in: memcpy, the one conversion C99 defines). */
static double cglow_bits_double(uint64_t bits)
{
    double value;
    memcpy(&value, &bits, 8);
    return value;
}
