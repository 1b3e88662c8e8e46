/* The number of leading zero bits of a 32-bit word, 32 for 0: one instruction where gcc or clang has
   __builtin_clzl (whatever the width of long), a loop elsewhere. */
static int32_t cglow_leading_zeros(uint32_t x)
{
#if defined(__GNUC__)
    return x ? (int32_t)__builtin_clzl((unsigned long)x) - (int32_t)(8 * sizeof(unsigned long) - 32) : 32;
#else
    int32_t n = 0;
    if (!x) {
        return 32;
    }
    while (!(x & 0x80000000u)) {
        x <<= 1;
        n++;
    }
    return n;
#endif
}
