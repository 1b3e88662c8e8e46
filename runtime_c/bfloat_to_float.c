/* A bfloat16 value, its bits, as a float: the float's upper half. Storage of bfloat16 tensors
   (graph/stored_types.py). */
static float cglow_bfloat_to_float(uint16_t bfloat)
{
    const uint32_t bits = (uint32_t)bfloat << 16;
    float value;
    memcpy(&value, &bits, 4);
    return value;
}
