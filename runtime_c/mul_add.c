/* a * b + c rounded twice, for the float kernels of a core whose fused multiply-add is slower than a multiply
 * and an add (the Cortex-M4F: VFMA and VMLA 3 cycles, VMUL and VADD 1 each). The product is a statement of
 * its own so that no compiler contracts the two into one fused instruction (clang's -ffp-contract=on fuses
 * within an expression; gcc does not contract in ISO C mode, -std=c99). */
#if defined(__GNUC__)
__attribute__((unused)) /* where every loop is the assembly of kernels/arm_steps.py (CGLOW_FP_ASM) */
#endif
static float cglow_mul_add(float a, float b, float c)
{
    const float product = a * b;
    return product + c;
}
