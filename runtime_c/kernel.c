/* CGLOW_KERNEL begins every kernel function. gcc is told to compile each kernel as a function of its own that
 * callers know nothing about (noipa: not inlined, not specialized, its side effects not summarized), because
 * gcc 12 miscompiles kernels it specializes for the constant arena addresses of their calls: once the
 * address is a constant, IVOPTs may fold it into an induction variable and write a store as "0 + iv"; the
 * pure-const analysis then takes that for a null pointer dereference, decides that the kernel has no side
 * effect, and net_run drops its calls (a transposed copy before q @ k^T in an attention block at x86-64 -O2;
 * kernels of the int8 transformer at -O2 -fno-inline). What that specialization taught gcc (which pointers
 * do not alias, and how far apart the views of one buffer lie) the kernels now say themselves (one restrict
 * parameter per buffer, kernels/kernel.py kernel_head), so nothing that makes them fast is lost with it.
 * Older gcc (before 8) has no noipa: noinline and noclone forbid the same inlining and specialization.
 * clang has no noipa either, and its interprocedural constant propagation put the arena's addresses in place of
 * a kernel's parameters, their restrict with them: a convolution with a residual input, whose output might then
 * alias it, lost its vectorized tile (x86-64 AVX-512 resnet8 net_2_conv took 14x gcc's time). `used` says that
 * something outside may call the kernel, so that clang keeps its parameters (and then leaves it out of line).
 * gcc -O3 also interchanges loops: a convolution's loop over kernel rows swapped with its loop over channels sums
 * a tile's products in another order, whose float sum differs from -O2's in its last bits (a 2 x 1 convolution,
 * graph 62 of seed 24); the kernels' loops are in the order their sums are defined in. The same time without it
 * (-O3 -march=native, x86-64, against the time with it: kws 1.00, resnet8 1.00, vww 1.01, transformer 1.01, unet
 * 1.01, gru_kws 1.00; forbidding unroll-and-jam too made gru_kws 1.09). */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8
#define CGLOW_KERNEL static __attribute__((noipa, optimize("no-loop-interchange")))
#elif defined(__GNUC__) && !defined(__clang__)
#define CGLOW_KERNEL static __attribute__((noinline, noclone))
#elif defined(__clang__)
#define CGLOW_KERNEL static __attribute__((used))
#else
#define CGLOW_KERNEL static
#endif
