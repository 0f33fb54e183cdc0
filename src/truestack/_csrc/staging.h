/* GIL-side store of samples folded out of the ring.
 *
 * Folding moves committed ring slots here and pins (increfs) their code
 * objects, so a code object referenced by a pending sample cannot die. When
 * a code object dies while a sample still in the ring holds it
 * (ts_ring_may_hold), the destroy hook folds the ring and resolves the dying
 * one on the spot (its frames become (name, file, line, firstlineno)
 * tuples), so no sample is ever attributed to a freed or reused object. The
 * other deaths cost the hook one lookup.
 */
#ifndef TS_STAGING_H
#define TS_STAGING_H
#include "Python.h"
#include "ts_common.h"

typedef struct {
    PyObject *obj; /* strong ref: code object, or identity tuple (TS_KIND_RESOLVED) */
    int32_t off;
    int32_t kind;
} ts_sframe;

typedef struct {
    int32_t tid;
    uint8_t state, partial;
    uint32_t depth, nframes;
    size_t first; /* index into frames */
    int64_t time_ns, weight_ns, cpu_delta_ns;
    uint64_t coro;
    /* --native: nnative return addresses then nsegs eval-call boundaries
     * (0xff: unknown), from words[first_word] */
    size_t first_word;
    uint16_t nnative;
    uint8_t nsegs, native_why;
} ts_ssample;

typedef struct {
    ts_ssample *samples;
    size_t n, cap;
    ts_sframe *frames;
    size_t nf, capf;
    uint64_t *words; /* --native data of the samples */
    size_t nw, capw;
} ts_staging;

extern ts_staging ts_S;

/* Folds every committed slot into ts_S; `dying` (may be NULL) is resolved
 * instead of pinned. wait_busy: also wait for in-progress slots. */
void ts_fold(PyObject *dying, int wait_busy);
/* Moves ts_S out (caller owns the arrays and the references). */
ts_staging ts_staging_take(void);
void ts_staging_forget_after_fork(void);
/* Installs the code destroy hook once per process. */
int ts_codehook_install(void);
const char *ts_codehook_kind(void);
extern uint64_t ts_codes_resolved_at_death;
/* Destroy-hook runs, and those that folded the ring (a pending sample held the dying code). */
extern uint64_t ts_settle_calls, ts_settle_folds;
/* (qualname, filename, firstlineno) of a code object. */
PyObject *ts_code_identity(PyObject *code);
/* Staged frame whose obj is a ts_code_identity tuple and off a line. */
#define TS_KIND_RESOLVED 0x100
#endif
