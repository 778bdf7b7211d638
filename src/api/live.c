/* live.c - the registry of live contexts (fj_ctx_live), which every entry point asks first. */
#include "internal.h"

/*------ the registry of live contexts ------
 * Every public entry point taking a context first asks fj_ctx_live, so a destroyed or
 * garbage pointer is refused before anything reads through it (reading freed memory to
 * find a magic word would itself be undefined). An open-addressed set of the addresses of
 * the live contexts, linear probing: lookups are lock-free (atomic loads only, no write to
 * shared memory, so many server threads calling into one context do not contend);
 * inserts and removals are serialized by a mutex. A removed address leaves a tombstone
 * that lookups step over; a tombstone followed by an empty slot becomes empty again (no
 * probe sequence runs through it), so the set does not silt up. At most REG_SLOTS / 2
 * contexts live at once. */
enum { REG_BITS = 12, REG_SLOTS = 1 << REG_BITS, REG_EMPTY = 0, REG_TOMB = 1 };
#define FJ_CTX_MAGIC 0x666a6374u   /* "fjct" */

static _Atomic uintptr_t g_reg[REG_SLOTS];
static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_reg_live;   /* under g_reg_lock */

static unsigned reg_hash(uintptr_t p)
{
    return (unsigned)(((uint64_t)p * 0x9E3779B97F4A7C15ull) >> (64 - REG_BITS));
}

int fj_ctx_live(const fajit_ctx *ctx)
{
    const uintptr_t p = (uintptr_t)ctx;
    if (p <= REG_TOMB)
        return 0;
    for (unsigned i = reg_hash(p), n = 0; n < REG_SLOTS; i = (i + 1) & (REG_SLOTS - 1), n++) {
        uintptr_t v = atomic_load_explicit(&g_reg[i], memory_order_acquire);
        if (v == p)
            return ctx->magic == FJ_CTX_MAGIC;
        if (v == REG_EMPTY)
            return 0;
    }
    return 0;
}

int fj_ctx_register(fajit_ctx *ctx)
{
    const uintptr_t p = (uintptr_t)ctx;
    int ok = 0;
    pthread_mutex_lock(&g_reg_lock);
    if (g_reg_live < REG_SLOTS / 2) {
        unsigned i = reg_hash(p);
        while (atomic_load_explicit(&g_reg[i], memory_order_relaxed) > REG_TOMB)
            i = (i + 1) & (REG_SLOTS - 1);
        ctx->magic = FJ_CTX_MAGIC;
        atomic_store_explicit(&g_reg[i], p, memory_order_release);
        g_reg_live++;
        ok = 1;
    }
    pthread_mutex_unlock(&g_reg_lock);
    return ok;
}

void fj_ctx_unregister(fajit_ctx *ctx)
{
    const uintptr_t p = (uintptr_t)ctx;
    pthread_mutex_lock(&g_reg_lock);
    for (unsigned i = reg_hash(p), n = 0; n < REG_SLOTS; i = (i + 1) & (REG_SLOTS - 1), n++) {
        uintptr_t v = atomic_load_explicit(&g_reg[i], memory_order_relaxed);
        if (v == REG_EMPTY)
            break;
        if (v != p)
            continue;
        ctx->magic = 0;
        g_reg_live--;
        if (atomic_load_explicit(&g_reg[(i + 1) & (REG_SLOTS - 1)], memory_order_relaxed) !=
            REG_EMPTY) {
            atomic_store_explicit(&g_reg[i], REG_TOMB, memory_order_release);
            break;
        }
        /* the end of a run: this slot and the tombstones before it become empty */
        atomic_store_explicit(&g_reg[i], REG_EMPTY, memory_order_release);
        for (unsigned j = (i - 1) & (REG_SLOTS - 1);
             atomic_load_explicit(&g_reg[j], memory_order_relaxed) == REG_TOMB;
             j = (j - 1) & (REG_SLOTS - 1))
            atomic_store_explicit(&g_reg[j], REG_EMPTY, memory_order_release);
        break;
    }
    pthread_mutex_unlock(&g_reg_lock);
}
