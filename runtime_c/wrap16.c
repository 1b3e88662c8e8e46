/* x as an int16_t holds it (two's complement: the low 16 bits), as gemmlowp's int16 fixed-point arithmetic stores
   each result (a plain cast would be implementation-defined out of range). */
static int32_t cglow_wrap16(int32_t x)
{
    return (int32_t)(((uint32_t)x + 0x8000u) & 0xFFFFu) - 0x8000;
}
