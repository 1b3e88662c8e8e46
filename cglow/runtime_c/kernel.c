/* CGLOW_KERNEL begins every kernel function. Each kernel is called once or a few times, from net_run. On a
 * core without vector registers gcc is told to keep it a function of its own (noipa): inlined into net_run,
 * the kernels' pointers become addresses in the arena and the registers their loops need go to them.
 * Measured under QEMU with arm-none-eabi-gcc 12 -O2, Cortex-M4 int8 kws / vww / resnet8 instructions per MAC:
 * 2.50 / 2.63 / 1.83 inlined, 2.38 / 2.45 / 1.71 not; float unchanged. Not noinline: gcc 12 specializes a
 * noinline function for its constant arguments and then drops some calls of the int8 transformer as if they
 * had no effect (also on x86-64, with -fno-inline). Vector cores gain nothing (x86-64 resnet8 10% slower):
 * there the kernels stay static functions that gcc may inline. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__SSE2__) && !defined(__ARM_NEON) && \
    !defined(__riscv_vector)
#define CGLOW_KERNEL static __attribute__((noipa))
#else
#define CGLOW_KERNEL static
#endif
