/* --native's fast path (see cfi.h): the modules' .eh_frame CFI, interpreted in
 * the handler.
 *
 * Why: libunwind's local unwinder takes its register-state cache lock with
 * every signal blocked, two rt_sigprocmask calls per frame: ~26 us for a
 * 19-frame sample on our VM, twice what the rest of the handler costs. The
 * same unwind, read straight from the CFI, needs no syscall.
 *
 * Here: the module snapshots, the row cache and the walk; cfi_rows.c finds
 * the row that holds at an address. What is modelled is what compilers emit
 * for x86-64 code: the CFA as rsp or rbp plus an offset, the return address
 * and rbp saved at an offset from it (or rbp kept), remember/restore state,
 * and the linkers' one CFA expression for .plt entries (cfi_rows.c).
 * Anything else (another CFA expression, as
 * in stack-realigning prologues and glibc's signal trampoline; a signal
 * frame; a 64-bit or version-4 CIE; an address no module's table covers, as
 * in JIT or libffi closure code, but for CPython's perf trampolines, whose
 * one fixed frame layout is stepped over; a load that faults) hands the whole sample
 * to libunwind, which then unwinds it from the start. Where the fast path
 * does finish, it stops where libunwind stops (an undefined return address
 * or rbp), so the two agree frame for frame: test builds can run both in the
 * handler and count the samples where they differ (_native._cfi_check).
 *
 * The module list: ts_cfi_prepare and ts_cfi_refresh (GIL held, never in the
 * handler) take a snapshot of every loaded module's .eh_frame_hdr search
 * table through dl_iterate_phdr, with a fingerprint of the loader's link_map
 * list. The handler checks that each module it uses is still the one mapped
 * there (module_is_current); an address in no module of the snapshot, or a
 * module that changed, makes it fall back and ask the next drain to compare
 * the fingerprint and take a new snapshot. Snapshots are published with one
 * atomic store; retired ones are kept (a handler may still be reading one),
 * at most MAX_SNAPSHOTS, a few KB each.
 */
#define _GNU_SOURCE
#include "cfi.h"
#include "cfi_read.h"
#include "safeload.h"
#include "unwind.h"
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

_Atomic uint64_t ts_cfi_unwound, ts_cfi_fallbacks;
uint64_t ts_cfi_snapshots;
atomic_int ts_cfi_enabled = 1;

#if defined(TS_HAVE_LIBUNWIND) && defined(__x86_64__)

typedef struct cfi_snapshot {
    struct cfi_snapshot *older; /* the snapshot this one replaced, kept */
    uint64_t fingerprint;
    int n;
    cfi_module m[];
} cfi_snapshot;

static _Atomic(cfi_snapshot *) current;
static atomic_int stale;
#define MAX_SNAPSHOTS 4096 /* a program dlopen-ing without end keeps the last one (then: libunwind) */

/* The module whose executable text holds pc, or NULL. */
TS_SIGNAL_SAFE static const cfi_module *module_of(const cfi_snapshot *s, uintptr_t pc) {
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (pc < s->m[mid].lo)
            hi = mid - 1;
        else if (pc >= s->m[mid].hi)
            lo = mid + 1;
        else
            return &s->m[mid];
    }
    return NULL;
}

/* Rows already found, by pc: a hot loop interrupts the same few hundred
 * instructions, and finding a row costs several cache misses (the search
 * table, the FDE, its program). Shared by every thread's handler without a
 * lock: each entry is a sequence lock whose writer claims it with one
 * compare-and-swap and gives up if another handler holds it, and whose reader
 * misses when the sequence moved under it. The snapshot generation in each
 * entry retires rows of modules since unloaded. */
#define ROW_CACHE 2048
enum { END = 3 }; /* the packed bp kinds: R_SAME, R_OFFSET, R_VAL_OFFSET as in `rule`, and END */
typedef struct {
    _Atomic uint64_t seq; /* odd while written */
    _Atomic uint64_t pc;
    _Atomic uint64_t rule; /* cfa_off:32 | ra_off:16 | bp_off:16 */
    _Atomic uint64_t meta; /* generation:32 | cfa is rbp:1 | bp kind:2 */
} cached_row;
static cached_row row_cache[ROW_CACHE];
static _Atomic uint32_t generation;

typedef struct {
    int end; /* the outermost frame: unwinding stops here */
    int cfa_bp;
    int32_t cfa_off;
    int16_t ra_off, bp_off;
    uint8_t bp_kind;
} compact_row;

TS_SIGNAL_SAFE static cached_row *slot_of(uintptr_t pc) {
    return &row_cache[((pc * 0x9E3779B97F4A7C15ULL) >> 40) & (ROW_CACHE - 1)];
}

TS_SIGNAL_SAFE static int cache_get(uintptr_t pc, uint32_t gen, compact_row *out) {
    cached_row *e = slot_of(pc);
    uint64_t seq = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (seq & 1) return 0;
    uint64_t at = atomic_load_explicit(&e->pc, memory_order_relaxed);
    uint64_t rule = atomic_load_explicit(&e->rule, memory_order_relaxed);
    uint64_t meta = atomic_load_explicit(&e->meta, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->seq, memory_order_relaxed) != seq || at != pc || (uint32_t)(meta >> 32) != gen)
        return 0;
    out->bp_kind = (uint8_t)(meta & 3);
    out->end = out->bp_kind == END;
    out->cfa_bp = (int)((meta >> 2) & 1);
    out->cfa_off = (int32_t)(uint32_t)rule;
    out->ra_off = (int16_t)(uint16_t)(rule >> 32);
    out->bp_off = (int16_t)(uint16_t)(rule >> 48);
    return 1;
}

TS_SIGNAL_SAFE static void cache_put(uintptr_t pc, uint32_t gen, const compact_row *r) {
    cached_row *e = slot_of(pc);
    uint64_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
    if ((seq & 1) ||
        !atomic_compare_exchange_strong_explicit(&e->seq, &seq, seq + 1, memory_order_acquire, memory_order_relaxed))
        return; /* another handler is writing it */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&e->pc, pc, memory_order_relaxed);
    atomic_store_explicit(&e->rule,
                          (uint64_t)(uint32_t)r->cfa_off | (uint64_t)(uint16_t)r->ra_off << 32 |
                              (uint64_t)(uint16_t)r->bp_off << 48,
                          memory_order_relaxed);
    atomic_store_explicit(&e->meta, (uint64_t)gen << 32 | (uint64_t)r->cfa_bp << 2 | r->bp_kind, memory_order_relaxed);
    atomic_store_explicit(&e->seq, seq + 2, memory_order_release);
}

/* The compact row at pc, from the cache or the module's CFI: 0, or -1 when
 * not modelled (or too large to pack). */
TS_SIGNAL_SAFE static int compact_row_at(const cfi_module *m, uint32_t gen, uintptr_t pc, compact_row *out) {
    if (cache_get(pc, gen, out)) return 0;
    row r;
    if (ts_cfi_row_at(m, pc, &r) != 0) return -1;
    *out = (compact_row){0};
    if (r.ra.kind == R_UNDEF || r.bp.kind == R_UNDEF) {
        out->end = 1, out->bp_kind = END;
    } else {
        if (r.ra.kind != R_OFFSET || (r.bp.kind != R_SAME && r.bp.kind != R_OFFSET && r.bp.kind != R_VAL_OFFSET))
            return -1;
        if (r.cfa_off != (int32_t)r.cfa_off || r.ra.off != (int16_t)r.ra.off || r.bp.off != (int16_t)r.bp.off)
            return -1;
        out->cfa_bp = r.cfa_reg == REG_BP;
        out->cfa_off = (int32_t)r.cfa_off;
        out->ra_off = (int16_t)r.ra.off;
        out->bp_off = (int16_t)r.bp.off;
        out->bp_kind = r.bp.kind;
    }
    cache_put(pc, gen, out);
    return 0;
}

/* Is the module the snapshot has at this address still the one mapped there?
 * Its .eh_frame_hdr's first bytes (encodings, .eh_frame's offset, the FDE
 * count, the first function) name it: a module unloaded since leaves them
 * unmapped (a fault: the sample keeps its Python frames) or another module's
 * bytes; the same library loaded again at the same address has the same ones,
 * and the same CFI, so rows cached for it still hold. Checked by the handler
 * instead of walking the loader's module list (one cache miss per module
 * per sample, not one per loaded module). */
TS_SIGNAL_SAFE static int module_is_current(const cfi_module *m) {
    cursor c = {(const uint8_t *)m->hdr, (const uint8_t *)m->hdr + 16, 0};
    return get_bytes(&c, 8) == m->ident[0] && get_bytes(&c, 8) == m->ident[1];
}

/* The loader's module list, hashed: which link_maps, at which load addresses
 * (GIL held, never in the handler). */
static uint64_t loader_fingerprint(void) {
    uint64_t h = 1469598103934665603ULL;
    int n = 0;
    for (struct link_map *l = *(struct link_map *volatile *)&_r_debug.r_map; l && n < 65536; n++) {
        h = (h ^ (uint64_t)(uintptr_t)l) * 1099511628211ULL;
        h = (h ^ (uint64_t) * (volatile ElfW(Addr) *)&l->l_addr) * 1099511628211ULL;
        l = *(struct link_map *volatile *)&l->l_next;
    }
    return h ^ (uint64_t)n;
}

/* CPython 3.12+'s perf trampoline (python -X perf: Python/asm_trampoline.S), copied into anonymous
 * memory once per code object called from C, so no module's CFI covers it: `sub $8,%rsp; call *%rcx;
 * add $8,%rsp; ret`. Is `ra` the return address of its call? Its 11 bytes are read around it with
 * aligned loads; any other code, or a fault, answers no. */
static const uint8_t perf_trampoline[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3};
#define PERF_TRAMPOLINE_RA 6 /* the return address's offset in it */

TS_SIGNAL_SAFE static int is_perf_trampoline_return(uint64_t ra) {
    uintptr_t from = (uintptr_t)ra - PERF_TRAMPOLINE_RA, base = from & ~(uintptr_t)7;
    uint64_t words[3];
    int fault = 0;
    for (int i = 0; i < 3; i++) words[i] = ts_load(base + 8 * (uintptr_t)i, &fault);
    if (fault) return 0;
    const uint8_t *bytes = (const uint8_t *)words + (from - base);
    for (size_t i = 0; i < sizeof perf_trampoline; i++)
        if (bytes[i] != perf_trampoline[i]) return 0;
    return 1;
}

TS_SIGNAL_SAFE int ts_cfi_unwind(void *ucv, uint64_t *ips, int max, int *why, int *seen) {
    const cfi_snapshot *snap = atomic_load_explicit(&current, memory_order_acquire);
    if (!snap || !atomic_load_explicit(&ts_cfi_enabled, memory_order_relaxed)) return -1;
    uint32_t gen = atomic_load_explicit(&generation, memory_order_relaxed);
    const cfi_module *checked = NULL; /* the module last found current, in this sample */
    *seen = 0;
    const greg_t *g = ((ucontext_t *)ucv)->uc_mcontext.gregs;
    uint64_t ip = (uint64_t)g[REG_RIP], sp = (uint64_t)g[REG_RSP], bp = (uint64_t)g[REG_RBP];
    int n = 0, fault = 0;
    *why = TS_NATIVE_OK;
    for (int first = 1; ip; first = 0) {
        if (n == max) {
            *why = TS_NATIVE_TRUNCATED;
            break;
        }
        ips[n++] = ip;
        *seen = n;
        /* A caller's return address may be one past its function's end. */
        uintptr_t pc = first ? ip : ip - 1;
        const cfi_module *m = module_of(snap, pc);
        if (!m && !first && is_perf_trampoline_return(ip)) {
            /* Its frame: 8 bytes it reserved, then its caller's return address. rbp is untouched. */
            uint64_t caller = ts_load(sp + 8, &fault);
            if (fault) return -1;
            ip = caller, sp += 16;
            continue;
        }
        if (!m || (m != checked && !module_is_current(m))) {
            atomic_store_explicit(&stale, 1, memory_order_relaxed); /* loaded or unloaded since: the next drain looks */
            return -1;
        }
        checked = m;
        compact_row r;
        if (compact_row_at(m, gen, pc, &r) != 0) return -1;
        if (r.end) break; /* the outermost frame */
        uint64_t cfa = (r.cfa_bp ? bp : sp) + (uint64_t)(int64_t)r.cfa_off;
        uint64_t caller = ts_load(cfa + (uint64_t)(int64_t)r.ra_off, &fault);
        if (r.bp_kind == R_OFFSET)
            bp = ts_load(cfa + (uint64_t)(int64_t)r.bp_off, &fault);
        else if (r.bp_kind == R_VAL_OFFSET)
            bp = cfa + (uint64_t)(int64_t)r.bp_off;
        if (fault || (caller == ip && cfa == sp)) return -1; /* libunwind's to judge */
        ip = caller, sp = cfa;
    }
    return n;
}

typedef struct {
    cfi_module *m;
    int n, cap;
} collection;

static int collect_module(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    collection *out = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0, hdr = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t at = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            if (at < lo) lo = at;
            if (at + ph->p_memsz > hi) hi = at + ph->p_memsz;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            hdr = at;
        }
    }
    if (!hdr || lo >= hi) return 0;
    const uint8_t *h = (const uint8_t *)hdr;
    if (h[0] != 1 || h[3] != PE_TABLE) return 0; /* no binary-searchable table: libunwind's */
    cursor c = {h + 4, h + 32, 0};
    get_encoded(&c, h[1], hdr); /* the .eh_frame pointer: not needed */
    uint64_t count = h[2] == PE_OMIT ? 0 : get_encoded(&c, h[2], hdr);
    if (c.bad || count == 0 || count > (1u << 26)) return 0;
    if (out->n == out->cap) {
        int cap = out->cap ? out->cap * 2 : 64;
        cfi_module *m = realloc(out->m, (size_t)cap * sizeof *m);
        if (!m) return 1;
        out->m = m, out->cap = cap;
    }
    cursor id = {h, h + 16, 0};
    uint64_t ident0 = get_bytes(&id, 8);
    out->m[out->n++] = (cfi_module){lo, hi, hdr, (uintptr_t)c.p, (uint32_t)count, {ident0, get_bytes(&id, 8)}};
    return 0;
}

static int by_text(const void *a, const void *b) {
    uintptr_t x = ((const cfi_module *)a)->lo, y = ((const cfi_module *)b)->lo;
    return x < y ? -1 : x > y;
}

static cfi_snapshot *take_snapshot(void) {
    uint64_t fingerprint = loader_fingerprint(); /* before: a module added meanwhile makes it stale */
    collection got = {0};
    dl_iterate_phdr(collect_module, &got);
    cfi_snapshot *s = malloc(sizeof *s + (size_t)got.n * sizeof(cfi_module));
    if (s) {
        atomic_fetch_add(&generation, 1); /* rows cached under the previous snapshot no longer hold */
        qsort(got.m, (size_t)got.n, sizeof *got.m, by_text);
        *s = (cfi_snapshot){NULL, fingerprint, got.n};
        if (got.n) memcpy(s->m, got.m, (size_t)got.n * sizeof *got.m);
        ts_cfi_snapshots++;
    }
    free(got.m);
    return s;
}

int ts_cfi_prepare(void) {
    if (atomic_load(&current)) { /* a later start: bring it up to date */
        atomic_store(&stale, 1);
        ts_cfi_refresh();
        return 0;
    }
    cfi_snapshot *s = take_snapshot();
    if (!s) return -ENOMEM;
    atomic_store_explicit(&current, s, memory_order_release);
    return 0;
}

void ts_cfi_refresh(void) {
    if (!atomic_exchange_explicit(&stale, 0, memory_order_relaxed)) return;
    cfi_snapshot *old = atomic_load(&current);
    if (!old || ts_cfi_snapshots >= MAX_SNAPSHOTS) return;
    if (*(volatile int *)&_r_debug.r_state != RT_CONSISTENT) {
        atomic_store(&stale, 1); /* the next drain */
        return;
    }
    if (loader_fingerprint() == old->fingerprint) return;
    cfi_snapshot *s = take_snapshot();
    if (!s) return;
    s->older = old;
    atomic_store_explicit(&current, s, memory_order_release);
}
#else
int ts_cfi_prepare(void) { return 0; }
void ts_cfi_refresh(void) {}
TS_SIGNAL_SAFE int ts_cfi_unwind(void *uc, uint64_t *ips, int max, int *why, int *seen) {
    (void)uc, (void)ips, (void)max, (void)why;
    *seen = 0;
    return -1;
}
#endif
