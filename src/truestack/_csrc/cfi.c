/* --native's fast path (see cfi.h): the modules' .eh_frame CFI, interpreted in
 * the handler.
 *
 * Why: libunwind's local unwinder takes its register-state cache lock with
 * every signal blocked, two rt_sigprocmask calls per frame: ~26 us for a
 * 19-frame sample on our VM, twice what the rest of the handler costs. The
 * same unwind, read straight from the CFI, needs no syscall.
 *
 * What is modelled is what compilers emit for x86-64 code: the CFA as rsp or
 * rbp plus an offset, the return address and rbp saved at an offset from it
 * (or rbp kept), remember/restore state. Anything else (a CFA expression, as
 * in stack-realigning prologues and glibc's signal trampoline; a signal
 * frame; a 64-bit or version-4 CIE; an address no module's table covers, as
 * in JIT or libffi closure code; a load that faults) hands the whole sample
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

typedef struct {
    uintptr_t lo, hi; /* the executable segments span [lo, hi) */
    uintptr_t hdr;    /* .eh_frame_hdr */
    uintptr_t table;  /* its search table: count pairs of hdr-relative sdata4 (start, fde) */
    uint32_t count;
    uint64_t ident[2]; /* the first 16 bytes at hdr: which module this is (see module_is_current) */
} cfi_module;

typedef struct cfi_snapshot {
    struct cfi_snapshot *older; /* the snapshot this one replaced, kept */
    uint64_t fingerprint;
    int n;
    cfi_module m[];
} cfi_snapshot;

static _Atomic(cfi_snapshot *) current;
static atomic_int stale;
#define MAX_SNAPSHOTS 4096 /* a program dlopen-ing without end keeps the last one (then: libunwind) */

/* DWARF register numbers (x86-64 psABI) and the pointer encodings (LSB). */
enum { REG_BP = 6, REG_SP = 7, REG_RA = 16 };
enum { PE_OMIT = 0xff, PE_PCREL = 0x10, PE_DATAREL = 0x30, PE_TABLE = 0x3b /* datarel | sdata4 */ };

/* How a register is recovered in the caller. */
enum { R_SAME, R_UNDEF, R_OFFSET, R_VAL_OFFSET, R_UNSUPPORTED };
typedef struct {
    uint8_t kind;
    int64_t off;
} rule;
typedef struct {
    int cfa_reg; /* REG_SP, REG_BP, or -1 (anything else) */
    int64_t cfa_off;
    rule bp, ra;
    int other_sp; /* a rule for rsp itself: not modelled */
} row;

typedef struct {
    const uint8_t *p, *end;
    int bad;
} cursor;

TS_SIGNAL_SAFE static uint64_t get_bytes(cursor *c, int n) {
    if (c->bad || c->end - c->p < n) {
        c->bad = 1;
        return 0;
    }
    uint64_t v = 0; /* unaligned, little-endian; bytewise, so no call to memcpy */
    for (int i = 0; i < n; i++) v |= (uint64_t)c->p[i] << (8 * i);
    c->p += n;
    return v;
}

TS_SIGNAL_SAFE static uint64_t get_uleb(cursor *c) {
    uint64_t v = 0;
    for (unsigned shift = 0; !c->bad; shift += 7) {
        if (c->p >= c->end || shift > 63) break;
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    c->bad = 1;
    return 0;
}

TS_SIGNAL_SAFE static int64_t get_sleb(cursor *c) {
    uint64_t v = 0;
    for (unsigned shift = 0; !c->bad; shift += 7) {
        if (c->p >= c->end || shift > 63) break;
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (shift + 7 < 64 && (b & 0x40)) v |= ~0ULL << (shift + 7);
            return (int64_t)v;
        }
    }
    c->bad = 1;
    return 0;
}

/* An encoded pointer; `datarel` is the base of DW_EH_PE_datarel. Indirect
 * pointers (personality routines only) are skipped, not followed. */
TS_SIGNAL_SAFE static uint64_t get_encoded(cursor *c, uint8_t enc, uintptr_t datarel) {
    uintptr_t field = (uintptr_t)c->p;
    uint64_t v;
    switch (enc & 0x0f) {
    case 0x00: v = get_bytes(c, 8); break;
    case 0x01: v = get_uleb(c); break;
    case 0x02: v = get_bytes(c, 2); break;
    case 0x03: v = get_bytes(c, 4); break;
    case 0x04: v = get_bytes(c, 8); break;
    case 0x09: v = (uint64_t)get_sleb(c); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)get_bytes(c, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)get_bytes(c, 4); break;
    case 0x0c: v = get_bytes(c, 8); break;
    default: c->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: return v;
    case PE_PCREL: return v + field;
    case PE_DATAREL: return v + datarel;
    default: c->bad = 1; return 0;
    }
}

typedef struct {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    int augmented; /* 'z': FDEs carry augmentation data */
    cursor insns;
} cie;

TS_SIGNAL_SAFE static int read_cie(uintptr_t at, cie *out) {
    cursor c = {(const uint8_t *)at, (const uint8_t *)at + 8, 0};
    uint32_t length = (uint32_t)get_bytes(&c, 4);
    if (length == 0 || length >= 0xfffffff0u) return -1; /* 64-bit DWARF: not modelled */
    c.end = (const uint8_t *)at + 4 + length;
    if (get_bytes(&c, 4) != 0) return -1; /* not a CIE */
    uint8_t version = (uint8_t)get_bytes(&c, 1);
    if (version != 1 && version != 3) return -1;
    const char *aug = (const char *)c.p;
    size_t auglen = 0; /* no strnlen: nothing the handler reaches goes through the PLT */
    while (c.p + auglen < c.end && aug[auglen] && auglen < 8) auglen++;
    if (auglen >= 8 || c.p + auglen >= c.end) return -1;
    c.p += auglen + 1;
    out->code_align = get_uleb(&c);
    out->data_align = get_sleb(&c);
    out->ra_reg = version == 1 ? get_bytes(&c, 1) : get_uleb(&c);
    out->fde_enc = 0;
    out->augmented = aug[0] == 'z';
    if (auglen && !out->augmented) return -1;
    if (out->augmented) {
        uint64_t n = get_uleb(&c);
        if (c.bad || n > (uint64_t)(c.end - c.p)) return -1;
        cursor a = {c.p, c.p + n, 0};
        for (size_t i = 1; i < auglen && !a.bad; i++) {
            switch (aug[i]) {
            case 'L': get_bytes(&a, 1); break;
            case 'P': {
                uint8_t penc = (uint8_t)get_bytes(&a, 1);
                get_encoded(&a, penc & 0x7f, 0);
                break;
            }
            case 'R': out->fde_enc = (uint8_t)get_bytes(&a, 1); break;
            default: return -1; /* 'S' (a signal frame) or unknown: libunwind's */
            }
        }
        if (a.bad) return -1;
        c.p += n;
    }
    if (c.bad || out->ra_reg != REG_RA || out->code_align == 0) return -1;
    out->insns = c;
    return 0;
}

TS_SIGNAL_SAFE static void set_rule(row *r, uint64_t reg, uint8_t kind, int64_t off) {
    if (reg == REG_BP)
        r->bp = (rule){kind, off};
    else if (reg == REG_RA)
        r->ra = (rule){kind, off};
    else if (reg == REG_SP)
        r->other_sp = kind != R_SAME;
}

/* DW_CFA_restore: the register's rule as the CIE set it (not allowed in the CIE itself). */
TS_SIGNAL_SAFE static int restore(row *r, uint64_t reg, const row *initial) {
    if (!initial) return -1;
    if (reg == REG_BP) r->bp = initial->bp;
    if (reg == REG_RA) r->ra = initial->ra;
    return 0;
}

#define STATE_DEPTH 8

/* Runs a CFA program into r, up to the row that holds at `pc` (`loc` is where
 * the program starts; `initial` the CIE's row, for DW_CFA_restore). */
TS_SIGNAL_SAFE static int run(cursor c, const cie *ci, uint64_t loc, uint64_t pc, row *r, const row *initial) {
    row saved[STATE_DEPTH];
    int depth = 0;
    while (c.p < c.end && !c.bad) {
        uint8_t op = (uint8_t)get_bytes(&c, 1);
        uint64_t reg, delta = 0;
        int advance = 0;
        switch (op >> 6) {
        case 1: delta = op & 0x3f, advance = 1; break;
        case 2: set_rule(r, op & 0x3f, R_OFFSET, (int64_t)get_uleb(&c) * ci->data_align); continue;
        case 3:
            if (restore(r, op & 0x3f, initial) != 0) return -1;
            continue;
        }
        if (!advance) switch (op) {
            case 0x00: break; /* nop */
            case 0x01: {      /* set_loc */
                uint64_t to = get_encoded(&c, ci->fde_enc, 0);
                if (c.bad) return -1;
                if (to > pc) return 0;
                loc = to;
                break;
            }
            case 0x02: delta = get_bytes(&c, 1), advance = 1; break;
            case 0x03: delta = get_bytes(&c, 2), advance = 1; break;
            case 0x04: delta = get_bytes(&c, 4), advance = 1; break;
            case 0x05: reg = get_uleb(&c), set_rule(r, reg, R_OFFSET, (int64_t)get_uleb(&c) * ci->data_align); break;
            case 0x06:
                if (restore(r, get_uleb(&c), initial) != 0) return -1;
                break;
            case 0x07: set_rule(r, get_uleb(&c), R_UNDEF, 0); break;
            case 0x08: set_rule(r, get_uleb(&c), R_SAME, 0); break;
            case 0x09: reg = get_uleb(&c), get_uleb(&c), set_rule(r, reg, R_UNSUPPORTED, 0); break;
            case 0x0a:
                if (depth == STATE_DEPTH) return -1;
                saved[depth++] = *r;
                break;
            case 0x0b:
                if (depth == 0) return -1;
                *r = saved[--depth];
                break;
            case 0x0c: r->cfa_reg = (int)get_uleb(&c), r->cfa_off = (int64_t)get_uleb(&c); break;
            case 0x0d: r->cfa_reg = (int)get_uleb(&c); break;
            case 0x0e: r->cfa_off = (int64_t)get_uleb(&c); break;
            case 0x0f: { /* def_cfa_expression */
                uint64_t n = get_uleb(&c);
                if (c.bad || n > (uint64_t)(c.end - c.p)) return -1;
                c.p += n;
                r->cfa_reg = -1;
                break;
            }
            case 0x10:   /* expression */
            case 0x16: { /* val_expression */
                reg = get_uleb(&c);
                uint64_t n = get_uleb(&c);
                if (c.bad || n > (uint64_t)(c.end - c.p)) return -1;
                c.p += n;
                set_rule(r, reg, R_UNSUPPORTED, 0);
                break;
            }
            case 0x11: reg = get_uleb(&c), set_rule(r, reg, R_OFFSET, get_sleb(&c) * ci->data_align); break;
            case 0x12: r->cfa_reg = (int)get_uleb(&c), r->cfa_off = get_sleb(&c) * ci->data_align; break;
            case 0x13: r->cfa_off = get_sleb(&c) * ci->data_align; break;
            case 0x14:
                reg = get_uleb(&c), set_rule(r, reg, R_VAL_OFFSET, (int64_t)get_uleb(&c) * ci->data_align);
                break;
            case 0x15: reg = get_uleb(&c), set_rule(r, reg, R_VAL_OFFSET, get_sleb(&c) * ci->data_align); break;
            case 0x2e: get_uleb(&c); break; /* GNU_args_size */
            case 0x2f: reg = get_uleb(&c), set_rule(r, reg, R_OFFSET, -(int64_t)get_uleb(&c) * ci->data_align); break;
            default: return -1;
            }
        if (advance) {
            uint64_t to = loc + delta * ci->code_align;
            if (to > pc) return 0; /* the row in force at pc is the one built so far */
            loc = to;
        }
    }
    return c.bad ? -1 : 0;
}

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

/* Entry i of a module's search table: its function's start (field 0) or its FDE (field 1). */
TS_SIGNAL_SAFE static uintptr_t table_entry(const cfi_module *m, uint32_t i, int field) {
    cursor c = {(const uint8_t *)(m->table + 8 * (uintptr_t)i + 4 * (uintptr_t)field), NULL, 0};
    c.end = c.p + 4;
    return m->hdr + (uintptr_t)(intptr_t)(int32_t)get_bytes(&c, 4);
}

/* The row of the CFI table that holds at pc: 0, or -1 when not modelled. */
TS_SIGNAL_SAFE static int row_at(const cfi_module *m, uintptr_t pc, row *r) {
    uint32_t lo = 0, hi = m->count;
    while (hi - lo > 1) { /* the last entry starting at or before pc */
        uint32_t mid = lo + (hi - lo) / 2;
        if (table_entry(m, mid, 0) <= pc)
            lo = mid;
        else
            hi = mid;
    }
    uintptr_t fde = table_entry(m, lo, 1);
    cursor c = {(const uint8_t *)fde, (const uint8_t *)fde + 8, 0};
    uint32_t length = (uint32_t)get_bytes(&c, 4);
    if (length == 0 || length >= 0xfffffff0u) return -1;
    c.end = (const uint8_t *)fde + 4 + length;
    uintptr_t id_at = (uintptr_t)c.p;
    uint32_t cie_off = (uint32_t)get_bytes(&c, 4);
    if (c.bad || cie_off == 0) return -1;
    cie ci;
    if (read_cie(id_at - cie_off, &ci) != 0) return -1;
    uint64_t start = get_encoded(&c, ci.fde_enc, 0);
    uint64_t range = get_encoded(&c, ci.fde_enc & 0x0f, 0);
    if (c.bad || pc < start || pc - start >= range) return -1;
    if (ci.augmented) {
        uint64_t n = get_uleb(&c);
        if (c.bad || n > (uint64_t)(c.end - c.p)) return -1;
        c.p += n;
    }
    *r = (row){.cfa_reg = -1, .bp = {R_SAME, 0}, .ra = {R_SAME, 0}};
    if (run(ci.insns, &ci, 0, UINT64_MAX, r, NULL) != 0) return -1;
    row initial = *r;
    if (run(c, &ci, start, pc, r, &initial) != 0) return -1;
    return (r->cfa_reg == REG_SP || r->cfa_reg == REG_BP) && !r->other_sp ? 0 : -1;
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
    if (row_at(m, pc, &r) != 0) return -1;
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

TS_SIGNAL_SAFE int ts_cfi_unwind(void *ucv, uint64_t *ips, int max, int *why) {
    const cfi_snapshot *snap = atomic_load_explicit(&current, memory_order_acquire);
    if (!snap || !atomic_load_explicit(&ts_cfi_enabled, memory_order_relaxed)) return -1;
    uint32_t gen = atomic_load_explicit(&generation, memory_order_relaxed);
    const cfi_module *checked = NULL; /* the module last found current, in this sample */
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
        /* A caller's return address may be one past its function's end. */
        uintptr_t pc = first ? ip : ip - 1;
        const cfi_module *m = module_of(snap, pc);
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
TS_SIGNAL_SAFE int ts_cfi_unwind(void *uc, uint64_t *ips, int max, int *why) {
    (void)uc, (void)ips, (void)max, (void)why;
    return -1;
}
#endif
