/* Eight 4-bit two's complement values unpacked to int8: the word at `packed` (memcpy) holds values 0-3 in the low
 * nibbles of its bytes 0-3 and values 4-7 in their high nibbles (instr/nibbles.py pack_octets). A nibble's sign
 * bit, 8, times 30 is 0xF0, its byte's upper bits; no product carries out of its byte, so the byte order of the
 * word does not matter. */
static void cglow_nibbles8(int8_t *to, const uint8_t *packed)
{
    uint32_t word, low, high;
    memcpy(&word, packed, 4);
    low = word & 0x0F0F0F0Fu;
    high = (word >> 4) & 0x0F0F0F0Fu;
    low |= (low & 0x08080808u) * 30u;
    high |= (high & 0x08080808u) * 30u;
    memcpy(to, &low, 4);
    memcpy(to + 4, &high, 4);
}
