/* The signal-safe frame walker, usable by any .c file of the extension.
 *
 * ts_walk() walks the interpreter frames of `tstate` (normally the calling
 * thread's own, found with ts_current_tstate()) from the leaf towards the
 * root and records at most `max` frames, leaf first, into `out`. It never
 * dereferences memory except through fault-tolerant loads, checks every
 * frame for plausibility, skips incomplete and shim frames, and keeps
 * counting after `max` so the result carries the true depth.
 *
 * walker.c is compiled twice: into truestack._native with the signal
 * handler's guarded loads, and into truestack._remote (TS_REMOTE_LOADS,
 * remote.c) with loads that read another process (`truestack dump`). The
 * second build changes nothing in the first: its hooks compile to nothing.
 */
#ifndef TS_WALKER_H
#define TS_WALKER_H
#include "ts_common.h"

/* Where each C-level call of the eval loop ends in the recorded frames
 * (--native interleaving): at[i] is the number of frames recorded, leaf
 * first, once the walk had passed the i-th eval call's outermost frame. A
 * call that ran no recorded frame yet repeats the previous count. */
typedef struct {
    uint16_t *at;
    int max, n;
    int overflow; /* more calls than `max`: the interleaving is unknown */
} ts_segs;

typedef struct {
    int nframes;   /* frames written to out (leaf first) */
    int depth;     /* true depth counted (>= nframes unless partial) */
    int partial;   /* TS_OK or a TS_* reason code */
    ts_segs *segs; /* NULL, or filled by ts_walk_segs() */
    /* Address of the outermost coroutine object on the stack, or 0: under an
     * event loop, the coroutine of the task being stepped (`--async` maps it
     * to its task; recorded always, one compare per generator frame). */
    uintptr_t coro;
} ts_walk_result;

TS_HIDDEN_BEGIN
/* This thread's own PyThreadState, or NULL (works without the GIL). */
TS_SIGNAL_SAFE void *ts_current_tstate(void);

TS_SIGNAL_SAFE void ts_walk(void *tstate, ts_rawframe *out, int max, ts_walk_result *res);
/* ts_walk() that also records the eval calls' boundaries into *segs. */
TS_SIGNAL_SAFE void ts_walk_segs(void *tstate, ts_rawframe *out, int max, ts_walk_result *res, ts_segs *segs);

/* Native thread id stored in the thread state (0 if unavailable). */
TS_SIGNAL_SAFE long ts_tstate_native_tid(void *tstate);
TS_HIDDEN_END
#endif
