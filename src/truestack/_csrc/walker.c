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

/* Is obj a generator, coroutine or async generator? */
TS_SIGNAL_SAFE static int is_generator(uintptr_t obj, int *fault) {
    uint64_t t = ts_load(obj + OB_TYPE_OFF, fault);
    return !*fault &&
           (t == (uintptr_t)ts_L.gen_type || t == (uintptr_t)ts_L.coro_type || t == (uintptr_t)ts_L.asyncgen_type);
}

/* The thread's datastack chunks (newest first), for frame location checks. */
typedef struct {
    ts_range r[TS_MAX_CHUNKS];
    int n;
    int truncated; /* more chunks than cached: frames beyond are unchecked */
    int cursor;    /* frames are visited newest to oldest: never look back */
    int top_in_r0; /* datastack_top lies in the newest chunk: r[0].hi is it */
} ts_chunks;

TS_SIGNAL_SAFE static void load_chunks(uintptr_t ts, ts_chunks *c, int *fault) {
    c->n = 0;
    c->cursor = 0;
    c->truncated = 0;
    c->top_in_r0 = 0;
    uintptr_t chunk = (uintptr_t)ts_load(ts + ts_L.ts_chunk, fault);
    uintptr_t top = (uintptr_t)ts_load(ts + ts_L.ts_stack_top, fault);
    while (chunk && !*fault) {
        if (c->n == TS_MAX_CHUNKS) {
            c->truncated = 1;
            break;
        }
        uintptr_t size = (uintptr_t)ts_load(chunk + ts_L.chunk_size, fault);
        uintptr_t hi = chunk + size;
        if (c->n == 0 && top > chunk && top <= hi) { /* live part of the newest chunk */
            hi = top;
            c->top_in_r0 = 1;
        }
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
        if (!is_generator(gen, fault)) return *fault ? TS_FAULT : TS_BAD_FRAME;
        int state = (int)(int8_t)ts_load_sized(gen + ts_L.gen_frame_state, 1, fault);
        if (*fault) return TS_FAULT;
        return state == ts_L.gen_executing ? TS_OK : TS_TORN;
    }
    if (*owner == ts_L.owner_frameobj)
        return is_type(f - ts_L.frobj_data, ts_L.frame_type, fault) ? TS_OK : (*fault ? TS_FAULT : TS_BAD_FRAME);
    if (ts_L.owner_cstack >= 0 && *owner == ts_L.owner_cstack) return TS_OK; /* lives on the C stack */
    return TS_BAD_FRAME;
}

#if defined(TS_REMOTE_LOADS)
/* The dump build (remote.c) also keeps each recorded frame's address, to
 * read its local variables; the sampler's build records nothing more. */
void ts_remote_note_frame(int i, uintptr_t frame);
#define NOTE_FRAME(i, frame) ts_remote_note_frame((i), (frame))
#else
#define NOTE_FRAME(i, frame) ((void)0)
#endif

/* Closes one C-level eval call's run of frames (see ts_segs). */
TS_SIGNAL_SAFE static void end_eval_call(ts_walk_result *res) {
    ts_segs *g = res->segs;
    if (!g || res->nframes >= (int)UINT16_MAX) return;
    if (g->n < g->max)
        g->at[g->n++] = (uint16_t)res->nframes;
    else
        g->overflow = 1;
}

/* Records one frame or only counts it once out is full. */
#define EMIT(frame_, code_, off_, kind_)                                                                               \
    do {                                                                                                               \
        if (res->nframes < max) {                                                                                      \
            NOTE_FRAME(res->nframes, (frame_));                                                                        \
            out[res->nframes].code = (void *)(code_);                                                                  \
            out[res->nframes].off_kind = TS_PACK((off_), (kind_));                                                     \
            res->nframes++;                                                                                            \
        }                                                                                                              \
        res->depth++;                                                                                                  \
    } while (0)

#if defined(TS_REMOTE_LOADS)
#define TS_IS_REMOTE 1
#else
#define TS_IS_REMOTE 0
#endif

/* Frames are walked leaf to root: the last coroutine noted is the outermost.
 * The dump build has no use for it: it would cost a remote read per frame. */
TS_SIGNAL_SAFE static void note_coro(uintptr_t gen, ts_walk_result *res) {
#if defined(TS_REMOTE_LOADS)
    (void)gen, (void)res;
#else
    int fault = 0;
    if (is_type(gen, ts_L.coro_type, &fault)) res->coro = gen;
#endif
}

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
        EMIT(f, code, lasti * 2, TS_KIND_PYTHON);
        if (ts_L.fr_gen >= 0 && !TS_IS_REMOTE) {
            uintptr_t gen = (uintptr_t)ts_load(f + ts_L.fr_gen, &fault);
            if (gen && !fault) note_coro(gen, res);
            fault = 0;
        }
        end_eval_call(res); /* 3.10 runs each frame in a C call of its own */
        f = (uintptr_t)ts_load(f + ts_L.fr_previous, &fault);
    }
    if (fault) res->partial = TS_FAULT;
}

/* Walks the chain from f (3.11+), recording into out/res. `lenient_leaf`:
 * f is the published leaf, which may be a generator frame being suspended
 * or resumed right now (its state flips a few instructions before the
 * chain is relinked): that is the frame being left or entered, not an
 * error. Deeper in the chain a generator is executing or it is not there.
 * Returns 1 if the chain passed through `anchor` (for anchor 0: ended
 * cleanly at NULL), else 0; res->partial says why a walk stopped early. */
TS_SIGNAL_SAFE static int walk_chain(uintptr_t f, uintptr_t anchor, int lenient_leaf, ts_chunks *chunks,
                                     ts_rawframe *out, int max, ts_walk_result *res) {
    int fault = 0, owner = 0, reached = 0, last_owner = -1;
    chunks->cursor = 0;
    for (int steps = 0; f && !fault; steps++) {
        if (steps > TS_MAX_WALK) {
            res->partial = TS_TOO_DEEP;
            return reached;
        }
        if (f == anchor) reached = 1;
        int why = plausible_iframe(f, chunks, &owner, &fault);
        if (why == TS_TORN && steps == 0 && lenient_leaf) why = TS_OK;
        if (why != TS_OK) {
            res->partial = fault ? TS_FAULT : why;
            return reached;
        }
        last_owner = owner;
        if (owner == ts_L.owner_gen) note_coro(f - ts_L.gen_iframe, res);
        uintptr_t next = (uintptr_t)ts_load(f + ts_L.fr_previous, &fault);
        int cstack = ts_L.owner_cstack >= 0 && owner == ts_L.owner_cstack; /* 3.12+: a C eval call's entry */
        /* 3.11 flags the outermost frame of each C eval call instead. */
        int entry = cstack || (ts_L.fr_is_entry >= 0 && res->segs && ts_load_sized(f + ts_L.fr_is_entry, 1, &fault));
        if (res->nframes >= max) {
            /* Only counting now: the location check and the owner suffice
             * (incomplete frames only occur at the leaf end). The eval calls
             * beyond still count: --native pairs them from the root. */
            if (!cstack) res->depth++;
            if (entry) end_eval_call(res);
            f = next;
            continue;
        }
        if (cstack) { /* entry shim: one C eval call ends */
            end_eval_call(res);
            f = next;
            continue;
        }
        uintptr_t code = (uintptr_t)ts_load(f + ts_L.fr_code, &fault);
        if (!is_type(code, ts_L.code_type, &fault)) {
            if (fault) break;
            res->partial = TS_BAD_CODE;
            return reached;
        }
        uintptr_t instr = (uintptr_t)ts_load(f + ts_L.fr_instr, &fault);
        long ncodeunits = (long)ts_load(code + OB_SIZE_OFF, &fault);
        int first = (int)(int32_t)ts_load_sized(code + ts_L.code_firsttraceable, 4, &fault);
        if (fault) break;
        long off = (long)(instr - (code + ts_L.code_adaptive));
        if (off < -2 || off >= ncodeunits * 2 || (off & 1)) {
            res->partial = TS_BAD_OFFSET;
            return reached;
        }
        /* Incomplete frame (pushed, not yet past RESUME): not really entered. */
        if (!(owner == ts_L.owner_gen) && off / 2 < first) {
            if (entry) end_eval_call(res);
            f = next;
            continue;
        }
        EMIT(f, code, off, TS_KIND_PYTHON);
        if (entry) end_eval_call(res);
        f = next;
    }
    if (fault) {
        res->partial = TS_FAULT;
        return reached;
    }
    /* A generator frame is always resumed by some frame (or an entry shim):
     * a chain that ends at one was read while its link was being written. */
    if (last_owner == ts_L.owner_gen) {
        res->partial = TS_TORN;
        return reached;
    }
    return reached || !anchor;
}

/* Does the chain from f pass through `target`? (guarded loads only) */
TS_SIGNAL_SAFE static int chain_reaches(uintptr_t f, uintptr_t target) {
    int fault = 0;
    for (int steps = 0; f && !fault && steps <= TS_MAX_WALK; steps++) {
        if (f == target) return 1;
        f = (uintptr_t)ts_load(f + ts_L.fr_previous, &fault);
    }
    return 0;
}

#define TS_UNSURE ((uintptr_t)1)

/* The newest thread-owned frame: the datastack holds live frames back to
 * back, each co_framesize words, from the newest chunk's start (the root
 * chunk skips its first word) to datastack_top (a chunk is freed when its
 * last frame is popped). 0 if there is none, TS_UNSURE if not shown. */
TS_SIGNAL_SAFE static uintptr_t top_thread_frame(const ts_chunks *c) {
    if (c->n == 0 || !c->top_in_r0) return TS_UNSURE;
    int fault = 0, root = c->n == 1 && !c->truncated;
    uintptr_t f = c->r[0].lo + (root ? sizeof(void *) : 0), top = c->r[0].hi;
    if (f == top) return root ? 0 : TS_UNSURE;
    for (int steps = 0; f < top && steps <= TS_MAX_WALK; steps++) {
        uintptr_t code = (uintptr_t)ts_load(f + ts_L.fr_code, &fault);
        if (!is_type(code, ts_L.code_type, &fault)) return TS_UNSURE;
        long size = (long)(int32_t)ts_load_sized(code + ts_L.code_framesize, 4, &fault) * (long)sizeof(void *);
        if (fault || size < ts_L.fr_min_size) return TS_UNSURE;
        if (f + (uintptr_t)size == top) return f;
        f += (uintptr_t)size;
    }
    return TS_UNSURE;
}

/* The most recently resumed generator frame still executing, other than
 * `skip`: every resume pushes the generator's gi_exc_state on
 * tstate->exc_info and every suspend or return pops it. 0 if none,
 * TS_UNSURE if the list holds something else. */
TS_SIGNAL_SAFE static uintptr_t top_executing_gen(uintptr_t ts, uintptr_t skip) {
    int fault = 0;
    uintptr_t e = (uintptr_t)ts_load(ts + ts_L.ts_exc_info, &fault);
    for (int steps = 0; e && !fault && steps <= TS_MAX_WALK; steps++) {
        if (e == ts + (uintptr_t)ts_L.ts_exc_state) return 0; /* the thread's own: no generator */
        uintptr_t gen = e - (uintptr_t)ts_L.gen_exc_state, f = gen + (uintptr_t)ts_L.gen_iframe;
        if (f != skip) {
            int executing = is_generator(gen, &fault) &&
                            (int)(int8_t)ts_load_sized(gen + ts_L.gen_frame_state, 1, &fault) == ts_L.gen_executing;
            return executing && !fault ? f : TS_UNSURE;
        }
        e = (uintptr_t)ts_load(e + ts_L.exc_previous, &fault);
    }
    return TS_UNSURE;
}

/* 3.12: the frame that resumed generator frame g, or that g is yielding
 * to, while g->previous is NULL (FOR_ITER_GEN publishes g as the top frame
 * before linking it to its caller; YIELD_VALUE unlinks g before publishing
 * the caller). That frame F is executing: if thread-owned it is the newest
 * frame on the datastack, if a generator's it is the newest executing
 * generator. Both candidates are live frames of the chain, so F is the one
 * whose chain holds the other. 0 when that cannot be shown. */
TS_SIGNAL_SAFE static uintptr_t resumer(uintptr_t ts, uintptr_t g, const ts_chunks *c) {
    if (ts_L.code_framesize < 0) return 0;
    uintptr_t t = top_thread_frame(c), h = top_executing_gen(ts, g);
    if (t == TS_UNSURE || h == TS_UNSURE) return 0;
    if (!t || !h) return t ? t : h;
    if (chain_reaches(t, h)) return t;
    return chain_reaches(h, t) ? h : 0;
}

TS_SIGNAL_SAFE static void reset_result(ts_walk_result *res) {
    res->nframes = 0;
    res->depth = 0;
    res->partial = TS_OK;
    res->coro = 0;
    if (res->segs) res->segs->n = res->segs->overflow = 0;
}

/* 3.11/3.12: the innermost eval loop publishes its top frame in
 * tstate->cframe->current_frame; every frame it runs chains down to its
 * entry frame, whose `previous` is the anchor: the calling eval loop's
 * current_frame (cframe->previous->current_frame), fixed while the inner
 * loop runs. So a chain read from the published leaf is trusted only if it
 * passes through the anchor. The leaf is unusable in two windows:
 *  - entry: tstate->cframe is stored before cframe.current_frame, which
 *    then holds stale C-stack contents;
 *  - frame pop (RETURN_GENERATOR on 3.11/3.12, returns on 3.11): the frame
 *    is popped off the datastack (or its chunk freed) before
 *    current_frame moves to its caller, which is still its `previous`.
 * gcc stores tstate->cframe first and both fields of the new cframe ~25
 * instructions later (3.12.1's _PyEval_EvalFrameDefault): `previous` is
 * stale too, 0 or another call's. Only the root cframe (no eval loop) has no
 * `previous`, and only it or the first loop's has no anchor: a cframe with
 * neither `previous` nor leaf and anchor is that window (CI: 2 empty stacks
 * published as complete in 21,228 checks). It is flagged TS_TORN, with no
 * frame: nothing on it can be trusted.
 * An implausible leaf is skipped for its `previous` when that chain reaches
 * the anchor (the frames in between are proven live: they are what the
 * anchor's inner loop is running). A generator leaf whose `previous` is not
 * written yet (3.12) is replaced by its caller (resumer()) on the same
 * condition. Otherwise only the anchor's chain is known: it is walked and
 * flagged TS_TORN, never reported complete. */
TS_SIGNAL_SAFE static void walk_cframe(uintptr_t ts, ts_chunks *chunks, ts_rawframe *out, int max,
                                       ts_walk_result *res) {
    int fault = 0, owner = 0;
    uintptr_t cf = (uintptr_t)ts_load(ts + ts_L.ts_top, &fault);
    if (!cf || fault) {
        res->partial = fault ? TS_FAULT : TS_OK;
        return;
    }
    uintptr_t leaf = (uintptr_t)ts_load(cf + ts_L.cf_current, &fault);
    uintptr_t prev_cf = (uintptr_t)ts_load(cf + ts_L.cf_previous, &fault);
    uintptr_t anchor = prev_cf && !fault ? (uintptr_t)ts_load(prev_cf + ts_L.cf_current, &fault) : 0;
    if (fault) {
        res->partial = TS_FAULT;
        return;
    }
    uintptr_t root = ts + (uintptr_t)ts_L.ts_root_cframe;
    if (cf != root && (!prev_cf || (!leaf && !anchor && prev_cf != root))) {
        res->partial = TS_TORN; /* the entry window: the new cframe is not written yet */
        return;
    }
    uintptr_t start = leaf;
    int lenient = 1;
    if (leaf) {
        int why = plausible_iframe(leaf, chunks, &owner, &fault);
        if (why == TS_BAD_FRAME || why == TS_FAULT) {
            fault = 0;
            start = (uintptr_t)ts_load(leaf + ts_L.fr_previous, &fault);
            lenient = 0; /* the caller of a popped frame is executing */
            if (fault) start = 0;
        }
    }
    if (!leaf && !anchor) return; /* no Python frame at all */
    if (start && walk_chain(start, anchor, lenient, chunks, out, max, res)) return;
    if (start == leaf && owner == ts_L.owner_gen && res->partial == TS_TORN) {
        /* A generator leaf not linked to its caller: walk from the caller
         * instead (the generator itself is the frame being entered or left). */
        uintptr_t unlinked = !ts_load(leaf + ts_L.fr_previous, &fault) && !fault;
        uintptr_t caller = unlinked ? resumer(ts, leaf, chunks) : 0;
        if (caller) {
            reset_result(res);
            if (walk_chain(caller, anchor, 0, chunks, out, max, res)) return;
        }
    }
    if (!anchor) { /* nothing to fall back on: keep what the walk found */
        if (res->partial == TS_OK) res->partial = TS_TORN;
        return;
    }
    reset_result(res);
    walk_chain(anchor, 0, 0, chunks, out, max, res);
    /* Whatever the anchor's own walk found, the cause is the torn leaf. */
    if (res->partial != TS_TOO_DEEP) res->partial = TS_TORN;
}

TS_SIGNAL_SAFE static void walk_iframes(uintptr_t ts, ts_rawframe *out, int max, ts_walk_result *res) {
    int fault = 0;
    ts_chunks chunks;
    load_chunks(ts, &chunks, &fault);
    if (fault) {
        res->partial = TS_FAULT;
        return;
    }
    if (ts_L.chain == TS_CHAIN_CFRAME) {
        walk_cframe(ts, &chunks, out, max, res);
        return;
    }
    uintptr_t f = (uintptr_t)ts_load(ts + ts_L.ts_top, &fault);
    if (fault) {
        res->partial = TS_FAULT;
        return;
    }
    if (f) walk_chain(f, 0, 1, &chunks, out, max, res);
}

TS_SIGNAL_SAFE void ts_walk(void *tstate, ts_rawframe *out, int max, ts_walk_result *res) {
    ts_walk_segs(tstate, out, max, res, NULL);
}

TS_SIGNAL_SAFE void ts_walk_segs(void *tstate, ts_rawframe *out, int max, ts_walk_result *res, ts_segs *segs) {
    res->segs = segs;
    reset_result(res);
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
