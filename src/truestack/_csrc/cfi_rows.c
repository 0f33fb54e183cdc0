/* --native's fast path, the interpreting half (see cfi.c): the row of a
 * module's CFI that holds at an address, found through its .eh_frame_hdr
 * search table, its FDE and CIE, and their CFA programs run up to it. Runs
 * in the SIGPROF handler, inside unwind.c's fault escape. */
#include "cfi_read.h"

#if defined(TS_HAVE_LIBUNWIND) && defined(__x86_64__)

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

/* The one CFA expression the fast path models: the x86-64 linkers' for the entries of a
 * lazy-binding .plt, "rsp + 8, and 8 more once pc is past the entry's push" (pc & 15 >= k).
 * Libraries built without -fno-semantic-interposition (pyenv's libpython) call their own
 * exported functions through PLT stubs, so a hot loop is often sampled in one; libunwind can
 * take those, but under `python -X perf` it stops at the first trampoline. Returns the CFA's
 * offset from rsp at pc, or 0 for any other expression (and in a CIE, run with no pc). */
TS_SIGNAL_SAFE static int64_t plt_cfa_offset(const uint8_t *e, uint64_t n, uint64_t pc) {
    /* DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and; DW_OP_lit<k>; DW_OP_ge;
     * DW_OP_lit3; DW_OP_shl; DW_OP_plus */
    static const uint8_t form[11] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x00, 0x2a, 0x33, 0x24, 0x22};
    if (n != sizeof form || pc == UINT64_MAX) return 0;
    for (size_t i = 0; i < sizeof form; i++)
        if (i != 6 && e[i] != form[i]) return 0;
    if (e[6] < 0x30 || e[6] > 0x4f) return 0; /* DW_OP_lit0 .. DW_OP_lit31 */
    return (pc & 15) >= (uint64_t)(e[6] - 0x30) ? 16 : 8;
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
                int64_t plt = plt_cfa_offset(c.p, n, pc);
                c.p += n;
                r->cfa_reg = plt ? REG_SP : -1;
                r->cfa_off = plt;
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

/* Entry i of a module's search table: its function's start (field 0) or its FDE (field 1). */
TS_SIGNAL_SAFE static uintptr_t table_entry(const cfi_module *m, uint32_t i, int field) {
    cursor c = {(const uint8_t *)(m->table + 8 * (uintptr_t)i + 4 * (uintptr_t)field), NULL, 0};
    c.end = c.p + 4;
    return m->hdr + (uintptr_t)(intptr_t)(int32_t)get_bytes(&c, 4);
}

TS_SIGNAL_SAFE int ts_cfi_row_at(const cfi_module *m, uintptr_t pc, row *r) {
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

#endif
