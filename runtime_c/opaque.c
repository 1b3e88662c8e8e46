/* value, which the compiler may not take for a constant: the argument of a C library function that the library
   computes to within an ulp or so (tanhf, asinf, powf...). Where the compiler proves the argument constant (a Clip's
   bound, which its branch passes), gcc -O2 computes the function itself, correctly rounded, and glibc's tanhf(erf(1))
   is an ulp off that, so -O0 and -O2 gave different bits. A volatile is portable C; the store and load cost little
   beside the call. */
static float cglow_opaque(float value)
{
    volatile float kept = value;
    return kept;
}
