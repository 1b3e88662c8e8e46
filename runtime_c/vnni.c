/* CGLOW_VNNI: whether the 8-bit dot products in C (kernels/dot.j2 reduce) take the x86-64 intrinsics of AVX-512
 * VNNI instead of their plain C loops: where the compiler says it generates AVX-512 VNNI and byte-masked
 * (AVX-512 BW) instructions (gcc or clang with -march=native on a core that has them, or -mavx512vnni
 * -mavx512bw). gcc turns the plain loops into VNNI vpdpbusd too, but ends each output's sum in a horizontal
 * reduction of its own (about 12 instructions beside its one vpdpbusd over 64 bytes); the intrinsics sum a
 * tile's sixteen outputs' vectors together (runtime_c/vnni_sum16.c). Elsewhere the C loops compute the same
 * sums. */
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__)
#include <immintrin.h>
#define CGLOW_VNNI 1
#else
#define CGLOW_VNNI 0
#endif
