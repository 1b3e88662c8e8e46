/* value clamped to [lo, hi]: the end of every requantization. Arm's saturating instructions clamp to the
   whole int8 or uint8 range in one (gcc does not find them itself); lo and hi are literals, so the test
   costs nothing. */
#if defined(__ARM_FEATURE_SAT) && __ARM_FEATURE_SAT && defined(__GNUC__)
#include <arm_acle.h>
#endif
static int32_t cglow_clamp(int32_t value, int32_t lo, int32_t hi)
{
#if defined(__ARM_FEATURE_SAT) && __ARM_FEATURE_SAT && defined(__GNUC__)
    if (lo == -128 && hi == 127) {
        return __ssat(value, 8);
    }
    if (lo == 0 && hi == 255) {
        return (int32_t)__usat(value, 8);
    }
#endif
    return value < lo ? lo : value > hi ? hi : value;
}
