/* --native's fast path, the reading half (see cfi.c): the types of the CFI
 * interpreter and the readers of the byte encodings .eh_frame uses. Everything
 * here runs in the SIGPROF handler. */
#ifndef TS_CFI_READ_H
#define TS_CFI_READ_H
#include "ts_common.h"

typedef struct {
    uintptr_t lo, hi; /* the executable segments span [lo, hi) */
    uintptr_t hdr;    /* .eh_frame_hdr */
    uintptr_t table;  /* its search table: count pairs of hdr-relative sdata4 (start, fde) */
    uint32_t count;
    uint64_t ident[2]; /* the first 16 bytes at hdr: which module this is (see module_is_current) */
} cfi_module;

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

TS_SIGNAL_SAFE static inline uint64_t get_bytes(cursor *c, int n) {
    if (c->bad || c->end - c->p < n) {
        c->bad = 1;
        return 0;
    }
    uint64_t v = 0; /* unaligned, little-endian; bytewise, so no call to memcpy */
    for (int i = 0; i < n; i++) v |= (uint64_t)c->p[i] << (8 * i);
    c->p += n;
    return v;
}

TS_SIGNAL_SAFE static inline uint64_t get_uleb(cursor *c) {
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

TS_SIGNAL_SAFE static inline int64_t get_sleb(cursor *c) {
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
TS_SIGNAL_SAFE static inline uint64_t get_encoded(cursor *c, uint8_t enc, uintptr_t datarel) {
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

TS_HIDDEN_BEGIN
/* The row of a module's CFI that holds at pc (cfi_rows.c): 0, or -1 when not modelled. */
TS_SIGNAL_SAFE int ts_cfi_row_at(const cfi_module *m, uintptr_t pc, row *r);
TS_HIDDEN_END
#endif
