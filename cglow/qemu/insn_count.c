/* insn_count.c: a QEMU TCG plugin that counts executed guest instructions, exactly, at marker points.
 *
 * Arguments: mark=ADDRESS (the first instruction of a marker function; decimal or 0x hex) and
 * out=FILE. Each time the guest executes the instruction at ADDRESS, the plugin records how many
 * instructions had executed up to and including it; at exit it writes the records to FILE, one decimal
 * number per line. The difference of two records is the exact number of instructions executed between
 * the two marker calls (the same on every run: TCG is deterministic for a single-core guest).
 *
 * Counting: every translated block adds its instruction count to a counter when it starts (an inline
 * add, cheap); a record subtracts the instructions of the block that follow the marker. Blocks run to
 * their end unless an exception interrupts them, which the measured code does not raise.
 *
 * Debian ships no qemu-plugin.h, so the few declarations used are written out below, as QEMU's plugin
 * API version 1 has them (QEMU 7.2 here; a QEMU that no longer accepts version 1 refuses to load the
 * plugin and says so). Built with the host C compiler as a shared library (cglow.cross.insn_count_plugin). */
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
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);

int qemu_plugin_version = 1;
int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv);

#define MAX_RECORDS 64

static uint64_t executed;                /* instructions of every block started so far */
static uint64_t mark;                    /* the marker's address */
static uint64_t records[MAX_RECORDS];
static size_t num_records;
static char out_path[4096];

static void on_mark(unsigned int vcpu_index, void *after)
{
    (void)vcpu_index;
    if (num_records < MAX_RECORDS) {
        records[num_records++] = executed - (uint64_t)(uintptr_t)after;
    }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb), i;
    (void)id;
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &executed, n);
    for (i = 0; i < n; ++i) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        if (qemu_plugin_insn_vaddr(insn) == mark) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)(uintptr_t)(n - 1 - i));
        }
    }
}

static void write_records(qemu_plugin_id_t id, void *userdata)
{
    FILE *out = fopen(out_path, "w");
    size_t i;
    (void)id;
    (void)userdata;
    if (out == NULL) {
        perror(out_path);
        return;
    }
    for (i = 0; i < num_records; ++i) {
        fprintf(out, "%" PRIu64 "\n", records[i]);
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
            fprintf(stderr, "insn_count: unknown or too long argument %s (expected mark=ADDRESS, out=FILE)\n",
                    argv[i]);
            return -1;
        }
    }
    if (!have_mark || out_path[0] == '\0') {
        fprintf(stderr, "insn_count: needs mark=ADDRESS and out=FILE\n");
        return -1;
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, write_records, NULL);
    return 0;
}
