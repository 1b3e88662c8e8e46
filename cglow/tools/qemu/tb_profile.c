/* tb_profile.c: a QEMU TCG plugin that records the executed path of a guest, between marker points, as
 * counts of block-to-block transitions. From these counts and the image's disassembly, cglow.tools.cross gets the
 * exact number of instructions executed and cglow.tools.m4_cycles an estimate of the cycles they take.
 *
 * Arguments: mark=ADDRESS (the first instruction of a marker function; decimal or 0x hex) and out=FILE.
 * A translated block (TB) is named by its first instruction's address and its number of instructions.
 * Each time a block starts, the plugin adds one to the count of the pair (the block that ran before it,
 * this block) in the current interval; the interval is the number of times the block at ADDRESS has
 * started. At exit it writes one line per pair and interval:
 *     interval previous-address previous-instructions address instructions count
 * (the previous block is "0 0" for the first block the guest runs). A pair says both how often a block
 * ran and where control came from, which is what decides whether the branch ending the previous block
 * was taken and whether the first instruction of this block pipelines with the previous one.
 *
 * The marker is a function called through a pointer, so a block always starts at ADDRESS (cglow.tools.m4_cycles
 * checks that no executed block holds it past its first instruction, cglow.tools.cross that there were three
 * marks). Blocks run to their end unless an exception interrupts them, which the measured code does not
 * raise. TCG is deterministic for a single-core guest: the counts are the same on every run.
 *
 * Debian ships no qemu-plugin.h, so the few declarations used are written out below, as QEMU's plugin
 * API version 1 has them (QEMU 7.2 here; a QEMU that no longer accepts version 1 refuses to load the
 * plugin and says so). Built with the host C compiler as a shared library (cglow.tools.cross.profile_plugin). */
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb, qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);

int qemu_plugin_version = 1;
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv);

struct block {             /* a translated block; blocks retranslated at the same address share one */
    uint64_t vaddr;
    uint64_t insns;
    struct block *next;    /* in its hash chain */
};

struct pair {              /* an entry of the transition table; prev == NULL and cur == NULL: empty */
    uint64_t interval;
    const struct block *prev, *cur;
    uint64_t count;
};

#define BLOCK_BUCKETS 4096

static struct block *blocks[BLOCK_BUCKETS];
static struct pair *pairs;
static size_t pairs_size, pairs_used;           /* size a power of two, at most half full */
static const struct block *previous;
static uint64_t interval, mark;
static char out_path[4096];

static void *allocate(size_t bytes)
{
    void *p = calloc(1, bytes);
    if (p == NULL) {
        fputs("tb_profile: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

static size_t pair_slot(const struct pair *table, size_t size, uint64_t iv, const struct block *prev,
                        const struct block *cur)
{
    size_t h = (size_t)(((uintptr_t)prev * 31u + (uintptr_t)cur) * 0x9E3779B97F4A7C15ull + iv) & (size - 1);
    while ((table[h].prev != NULL || table[h].cur != NULL)
           && (table[h].interval != iv || table[h].prev != prev || table[h].cur != cur)) {
        h = (h + 1) & (size - 1);
    }
    return h;
}

static void grow_pairs(void)
{
    size_t size = pairs_size ? 2 * pairs_size : 1024, i;
    struct pair *table = allocate(size * sizeof *table);
    for (i = 0; i < pairs_size; ++i) {
        if (pairs[i].cur != NULL) {
            table[pair_slot(table, size, pairs[i].interval, pairs[i].prev, pairs[i].cur)] = pairs[i];
        }
    }
    free(pairs);
    pairs = table;
    pairs_size = size;
}

static void on_block(unsigned int vcpu_index, void *userdata)
{
    const struct block *cur = userdata;
    size_t h;
    (void)vcpu_index;
    if (cur->vaddr == mark) {
        ++interval;
    }
    if (2 * (pairs_used + 1) > pairs_size) {
        grow_pairs();
    }
    h = pair_slot(pairs, pairs_size, interval, previous, cur);
    if (pairs[h].cur == NULL) {
        pairs[h].interval = interval;
        pairs[h].prev = previous;
        pairs[h].cur = cur;
        ++pairs_used;
    }
    ++pairs[h].count;
    previous = cur;
}

static const struct block *block_of(uint64_t vaddr, uint64_t insns)
{
    size_t h = (size_t)((vaddr >> 1) * 0x9E3779B97F4A7C15ull >> 52) % BLOCK_BUCKETS;
    struct block *b;
    for (b = blocks[h]; b != NULL; b = b->next) {
        if (b->vaddr == vaddr && b->insns == insns) {
            return b;
        }
    }
    b = allocate(sizeof *b);
    b->vaddr = vaddr;
    b->insns = insns;
    b->next = blocks[h];
    blocks[h] = b;
    return b;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    uint64_t vaddr = qemu_plugin_tb_vaddr(tb), insns = qemu_plugin_tb_n_insns(tb);
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_cb(tb, on_block, QEMU_PLUGIN_CB_NO_REGS, (void *)block_of(vaddr, insns));
}

static void write_pairs(qemu_plugin_id_t id, void *userdata)
{
    FILE *out = fopen(out_path, "w");
    size_t i;
    (void)id;
    (void)userdata;
    if (out == NULL) {
        perror(out_path);
        return;
    }
    for (i = 0; i < pairs_size; ++i) {
        const struct pair *p = &pairs[i];
        if (p->cur != NULL) {
            fprintf(out, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", p->interval,
                    p->prev ? p->prev->vaddr : 0, p->prev ? p->prev->insns : 0, p->cur->vaddr, p->cur->insns,
                    p->count);
        }
    }
    fclose(out);
}

int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    int i, have_mark = 0;
    (void)info;
    for (i = 0; i < argc; ++i) {
        if (strncmp(argv[i], "mark=", 5) == 0) {
            mark = strtoull(argv[i] + 5, NULL, 0);
            have_mark = 1;
        } else if (strncmp(argv[i], "out=", 4) == 0 && strlen(argv[i] + 4) < sizeof out_path) {
            strcpy(out_path, argv[i] + 4);
        } else {
            fprintf(stderr, "tb_profile: unknown or too long argument %s (expected mark=ADDRESS, out=FILE)\n",
                    argv[i]);
            return -1;
        }
    }
    if (!have_mark || out_path[0] == '\0') {
        fputs("tb_profile: needs mark=ADDRESS and out=FILE\n", stderr);
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, write_pairs, NULL);
    return 0;
}
