/* The sums of the 16 int32 lanes of each of sixteen vectors, v[i]'s in lane i (CGLOW_VNNI): pairs of vectors
 * interleaved and added, lanes 0-1 with 2-3 of each 128-bit quarter, then 64-bit halves, then quarters (45
 * instructions, where summing each vector apart takes about 12). Inlined, for its sixteen vectors to stay in
 * registers: gcc called it with them in memory (int8 kws took a third of its time in it). */
#if CGLOW_VNNI
static __inline__ __attribute__((always_inline)) __m512i cglow_vnni_sum16(const __m512i v[16])
{
    __m512i pairs[8], fours[4], halves[2];
    int i;
    for (i = 0; i < 8; ++i) {
        pairs[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                    _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    }
    for (i = 0; i < 4; ++i) {
        fours[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(pairs[2 * i], pairs[2 * i + 1]),
                                    _mm512_unpackhi_epi64(pairs[2 * i], pairs[2 * i + 1]));
    }
    for (i = 0; i < 2; ++i) {
        halves[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(fours[2 * i], fours[2 * i + 1], 0x88),
                                     _mm512_shuffle_i32x4(fours[2 * i], fours[2 * i + 1], 0xdd));
    }
    return _mm512_add_epi32(_mm512_shuffle_i32x4(halves[0], halves[1], 0x88),
                            _mm512_shuffle_i32x4(halves[0], halves[1], 0xdd));
}
#endif
