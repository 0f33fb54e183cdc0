/* Signal-safe walk of a thread's interpreter frames (see walker.h).
 * All layout knowledge comes from ts_L (ts_version.h). */
#include <pthread.h>
#include "walker.h"
#include "safeload.h"
#include "ts_version.h"

#define TS_MAX_CHUNKS 64
#define OB_TYPE_OFF   8  /* offsetof(PyObject, ob_type) on every supported build */
#define OB_SIZE_OFF   16 /* offsetof(PyVarObject, ob_size) */

typedef struct {
    uintptr_t lo, hi;
} ts_range;

TS_SIGNAL_SAFE void *ts_current_tstate(void) { return pthread_getspecific((pthread_key_t)ts_tstate_key); }

TS_SIGNAL_SAFE long ts_tstate_native_tid(void *tstate) {
    int fault = 0;
    if (!tstate || ts_L.ts_native_tid < 0) return 0;
    return (long)ts_load((uintptr_t)tstate + ts_L.ts_native_tid, &fault);
}

TS_SIGNAL_SAFE static int is_type(uintptr_t obj, const void *type, int *fault) {
    return ts_load(obj + OB_TYPE_OFF, fault) == (uint64_t)(uintptr_t)type && !*fault;
}

/* The thread's datastack chunks (newest first), for frame location checks. */
typedef struct {
    ts_range r[TS_MAX_CHUNKS];
    int n;
    int truncated; /* more chunks than cached: frames beyond are unchecked */
    int cursor;    /* frames are visited newest to oldest: never look back */
} ts_chunks;

TS_SIGNAL_SAFE static void load_chunks(uintptr_t ts, ts_chunks *c, int *fault) {
    c->n = 0;
    c->cursor = 0;
    c->truncated = 0;
    uintptr_t chunk = (uintptr_t)ts_load(ts + ts_L.ts_chunk, fault);
    uintptr_t top = (uintptr_t)ts_load(ts + ts_L.ts_stack_top, fault);
    while (chunk && !*fault) {
        if (c->n == TS_MAX_CHUNKS) {
            c->truncated = 1;
            break;
        }
        uintptr_t size = (uintptr_t)ts_load(chunk + ts_L.chunk_size, fault);
        uintptr_t hi = chunk + size;
        if (c->n == 0 && top > chunk && top <= hi) hi = top; /* live part of the newest chunk */
        c->r[c->n].lo = chunk + ts_L.chunk_data;
        c->r[c->n].hi = hi;
        c->n++;
        chunk = (uintptr_t)ts_load(chunk + ts_L.chunk_previous, fault);
    }
}

TS_SIGNAL_SAFE static int in_chunks(ts_chunks *c, uintptr_t f) {
    for (int i = c->cursor; i < c->n; i++) {
        if (f >= c->r[i].lo && f + (uintptr_t)ts_L.fr_min_size <= c->r[i].hi) {
            c->cursor = i;
            return 1;
        }
    }
    return c->truncated;
}

/* 3.11+: is f a plausible _PyInterpreterFrame? Sets *owner. Returns TS_OK,
 * or the reason it is not (TS_BAD_FRAME; TS_TORN for a generator frame that
 * is not executing, i.e. one being suspended or resumed at this instant). */
TS_SIGNAL_SAFE static int plausible_iframe(uintptr_t f, ts_chunks *c, int *owner, int *fault) {
    if (f & 7) return TS_BAD_FRAME;
    *owner = (int)ts_load_sized(f + ts_L.fr_owner, 1, fault);
    if (*fault) return TS_FAULT;
    if (*owner == ts_L.owner_thread) return in_chunks(c, f) ? TS_OK : TS_BAD_FRAME;
    if (*owner == ts_L.owner_gen) {
        uintptr_t gen = f - ts_L.gen_iframe;
        uint64_t t = ts_load(gen + OB_TYPE_OFF, fault);
        if (*fault) return TS_FAULT;
        if (t != (uintptr_t)ts_L.gen_type && t != (uintptr_t)ts_L.coro_type && t != (uintptr_t)ts_L.asyncgen_type)
            return TS_BAD_FRAME;
        int state = (int)(int8_t)ts_load_sized(gen + ts_L.gen_frame_state, 1, fault);
        if (*fault) return TS_FAULT;
        return state == ts_L.gen_executing ? TS_OK : TS_TORN;
    }
    if (*owner == ts_L.owner_frameobj)
        return is_type(f - ts_L.frobj_data, ts_L.frame_type, fault) ? TS_OK : (*fault ? TS_FAULT : TS_BAD_FRAME);
    if (ts_L.owner_cstack >= 0 && *owner == ts_L.owner_cstack) return TS_OK; /* lives on the C stack */
    return TS_BAD_FRAME;
}

/* Records one frame or only counts it once out is full. */
#define EMIT(code_, off_, kind_)                                                                                       \
    do {                                                                                                               \
        if (res->nframes < max) {                                                                                      \
            out[res->nframes].code = (void *)(code_);                                                                  \
            out[res->nframes].off_kind = TS_PACK((off_), (kind_));                                                     \
            res->nframes++;                                                                                            \
        }                                                                                                              \
        res->depth++;                                                                                                  \
    } while (0)

TS_SIGNAL_SAFE static void walk_frameobjects(uintptr_t ts, ts_rawframe *out, int max, ts_walk_result *res) {
    int fault = 0;
    uintptr_t f = (uintptr_t)ts_load(ts + ts_L.ts_top, &fault);
    for (int steps = 0; f && !fault; steps++) {
        if (steps > TS_MAX_WALK) {
            res->partial = TS_TOO_DEEP;
            return;
        }
        if (!is_type(f, ts_L.frame_type, &fault)) {
            res->partial = fault ? TS_FAULT : TS_BAD_FRAME;
            return;
        }
        uintptr_t code = (uintptr_t)ts_load(f + ts_L.fr_code, &fault);
        if (!is_type(code, ts_L.code_type, &fault)) {
            res->partial = fault ? TS_FAULT : TS_BAD_CODE;
            return;
        }
        int lasti = (int)(int32_t)ts_load_sized(f + ts_L.fr_instr, 4, &fault);
        if (fault) break;
        if (lasti < -1 || lasti > (1 << 27)) {
            res->partial = TS_BAD_OFFSET;
            return;
        }
        EMIT(code, lasti * 2, TS_KIND_PYTHON);
        f = (uintptr_t)ts_load(f + ts_L.fr_previous, &fault);
    }
    if (fault) res->partial = TS_FAULT;
}

TS_SIGNAL_SAFE static void walk_iframes(uintptr_t ts, ts_rawframe *out, int max, ts_walk_result *res) {
    int fault = 0, owner = 0;
    ts_chunks chunks;
    load_chunks(ts, &chunks, &fault);
    if (fault) {
        res->partial = TS_FAULT;
        return;
    }
    uintptr_t f;
    int why = TS_OK, leaf_checked = 0; /* the leaf's check, when already made */
    if (ts_L.chain == TS_CHAIN_CFRAME) {
        uintptr_t cf = (uintptr_t)ts_load(ts + ts_L.ts_top, &fault);
        f = cf ? (uintptr_t)ts_load(cf + ts_L.cf_current, &fault) : 0;
        if (f && !fault) {
            why = plausible_iframe(f, &chunks, &owner, &fault);
            leaf_checked = 1;
        }
        if (leaf_checked && (why == TS_BAD_FRAME || why == TS_FAULT)) {
            /* Torn publication: the eval loop stores tstate->cframe before
             * initialising cframe.current_frame. The frame being entered is
             * not started yet, so the caller's cframe holds the true top. */
            fault = 0;
            chunks.cursor = 0;
            leaf_checked = 0;
            uintptr_t prev = (uintptr_t)ts_load(cf + ts_L.cf_previous, &fault);
            f = prev ? (uintptr_t)ts_load(prev + ts_L.cf_current, &fault) : 0;
            if (!f && !fault) {
                res->partial = TS_TORN;
                return;
            }
        }
    } else {
        f = (uintptr_t)ts_load(ts + ts_L.ts_top, &fault);
    }
    int last_owner = -1;
    for (int steps = 0; f && !fault; steps++) {
        if (steps > TS_MAX_WALK) {
            res->partial = TS_TOO_DEEP;
            return;
        }
        if (!leaf_checked) why = plausible_iframe(f, &chunks, &owner, &fault);
        leaf_checked = 0;
        /* The leaf may be a generator frame being suspended or resumed right
         * now (its state flips a few instructions before the chain is
         * relinked): that is the frame being left or entered, not an error.
         * Deeper in the chain a generator is executing or it is not there. */
        if (why == TS_TORN && steps == 0) why = TS_OK;
        if (why != TS_OK) {
            res->partial = fault ? TS_FAULT : why;
            return;
        }
        last_owner = owner;
        uintptr_t next = (uintptr_t)ts_load(f + ts_L.fr_previous, &fault);
        if (res->nframes >= max) {
            /* Only counting now: the location check and the owner suffice
             * (incomplete frames only occur at the leaf end). */
            if (!(ts_L.owner_cstack >= 0 && owner == ts_L.owner_cstack)) res->depth++;
            f = next;
            continue;
        }
        if (ts_L.owner_cstack >= 0 && owner == ts_L.owner_cstack) { /* entry shim */
            f = next;
            continue;
        }
        uintptr_t code = (uintptr_t)ts_load(f + ts_L.fr_code, &fault);
        if (!is_type(code, ts_L.code_type, &fault)) {
            if (fault) break;
            res->partial = TS_BAD_CODE;
            return;
        }
        uintptr_t instr = (uintptr_t)ts_load(f + ts_L.fr_instr, &fault);
        long ncodeunits = (long)ts_load(code + OB_SIZE_OFF, &fault);
        int first = (int)(int32_t)ts_load_sized(code + ts_L.code_firsttraceable, 4, &fault);
        if (fault) break;
        long off = (long)(instr - (code + ts_L.code_adaptive));
        if (off < -2 || off >= ncodeunits * 2 || (off & 1)) {
            res->partial = TS_BAD_OFFSET;
            return;
        }
        /* Incomplete frame (pushed, not yet past RESUME): not really entered. */
        if (!(owner == ts_L.owner_gen) && off / 2 < first) {
            f = next;
            continue;
        }
        EMIT(code, off, TS_KIND_PYTHON);
        f = next;
    }
    /* A generator frame is always resumed by some frame (or an entry shim):
     * a chain that ends at one was read while its link was being written. */
    if (!fault && last_owner == ts_L.owner_gen) res->partial = TS_TORN;
    if (fault) res->partial = TS_FAULT;
}

TS_SIGNAL_SAFE void ts_walk(void *tstate, ts_rawframe *out, int max, ts_walk_result *res) {
    res->nframes = 0;
    res->depth = 0;
    res->partial = TS_OK;
    if (!tstate) {
        res->partial = TS_NO_TSTATE;
        return;
    }
    /* Only the main interpreter's frames are walked: a sub-interpreter's code
     * objects die without our destroy hook and belong to another GIL. */
    int fault = 0;
    uint64_t interp = ts_load((uintptr_t)tstate + (uintptr_t)ts_L.ts_interp, &fault);
    if (fault || interp != (uint64_t)(uintptr_t)ts_L.main_interp) {
        res->partial = fault ? TS_FAULT : TS_OTHER_INTERP;
        return;
    }
    if (ts_L.chain == TS_CHAIN_FRAMEOBJ)
        walk_frameobjects((uintptr_t)tstate, out, max, res);
    else
        walk_iframes((uintptr_t)tstate, out, max, res);
}
