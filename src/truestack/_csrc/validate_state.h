/* Shared state of the `truestack validate` oracle (validate_*.c).
 *
 * The oracle checks the signal-safe walker in layers (see
 * src/truestack/validate/__init__.py): the walker against the interpreter's
 * own frame chain at function entries (sync layer), a per-thread shadow stack
 * kept by call/return events against the same chain (shadow layer, the ground
 * the async layer stands on), and the walker against the shadow stack at
 * randomly timed signals (async layer).
 */
#ifndef TS_VALIDATE_STATE_H
#define TS_VALIDATE_STATE_H

#include "Python.h"
#include "frameobject.h"
#include <signal.h>
#include "ts_common.h"
#include "core_api.h"

/* The sampler core this oracle checks (validate_module.c imports it). */
extern const ts_core_api *ts_core;

#define TS_V_MAX_THREADS 1024
#define TS_V_WALK_CAP    4096 /* leaf-most frames compared per check */
#define TS_V_EX_CAP      48   /* leaf-most frames kept in an example stack */

enum { TS_V_SYNC = 0, TS_V_ASYNC = 1, TS_V_SHADOW = 2, TS_V_NLAYERS = 3 };

enum {
    TS_V_OK = 0,
    TS_V_BOUNDARY,   /* only the frame entered or left at that instant differs */
    TS_V_MISSING,    /* walker lacks frames the truth has */
    TS_V_EXTRA,      /* walker has frames the truth lacks */
    TS_V_REORDERED,  /* same frames, different order */
    TS_V_WRONG_CODE, /* a frame names the wrong code object */
    TS_V_WRONG_LINE, /* right code objects, a wrong line (sync layer only) */
    TS_V_PARTIAL,    /* the walker flagged its result incomplete or suspect */
    TS_V_NKINDS
};
extern const char *const ts_v_kind_names[TS_V_NKINDS];
extern const char *const ts_v_layer_names[TS_V_NLAYERS];

/* One thread's shadow stack. Only its own thread writes it (from event
 * callbacks, GIL held); the signal handler reads it on the same thread, so
 * ordering needs compiler fences only. */
typedef struct ts_vshadow {
    void **volatile codes; /* root-first code pointers, [0, depth) valid; strong refs */
    int *below;            /* entries to drop along with this one (silently linked callers) */
    volatile int depth;
    volatile int deferred; /* top entries whose frames are being unlinked without an event */
    int cap;
    int tid;
    int slot;
    volatile sig_atomic_t busy; /* sync check or reseed in progress: handler skips */
    unsigned long starts;       /* function entries seen, for every-Nth sync checks */
    /* scratch preallocated for the walker and the comparisons */
    ts_rawframe *wbuf; /* TS_V_WALK_CAP raw frames as the walker writes them */
    void **wcodes;     /* walker result root-first */
    int *woffs;
    void **tcodes; /* truth (frame chain) root-first, sync only */
    int *tlines;
} ts_vshadow;

extern __thread ts_vshadow *ts_v_tls __attribute__((tls_model("initial-exec")));

/* Registered threads, read by the signal-sending thread. tid 0 = free. */
extern _Atomic int ts_v_slots[TS_V_MAX_THREADS];

/* Global switches and counters. */
extern _Atomic int ts_v_on;
extern int ts_v_sync_every;
extern _Atomic uint64_t ts_v_checked[TS_V_NLAYERS];
extern _Atomic uint64_t ts_v_counts[TS_V_NLAYERS][TS_V_NKINDS];
extern _Atomic uint64_t ts_v_partial_reasons[TS_NREASONS];
extern _Atomic uint64_t ts_v_sig_sent, ts_v_sig_esrch, ts_v_sig_handled, ts_v_sig_busy, ts_v_sig_unregistered;
extern _Atomic uint64_t ts_v_resyncs, ts_v_pop_mismatch, ts_v_threads_seen, ts_v_silent_links;

/* Fault injection for the oracle's own test (TRUESTACK_TEST_WALKER_FAULT),
 * compiled only into test builds (TS_TEST_HOOKS, set by TRUESTACK_TEST_BUILD=1):
 * the wheel a user installs cannot damage its own results. */
enum { TS_V_FAULT_NONE = 0, TS_V_FAULT_DROP = 1, TS_V_FAULT_SWAP = 2 };
extern _Atomic uint64_t ts_v_faults_applied;
#ifdef TS_TEST_HOOKS
extern int ts_v_fault_kind, ts_v_fault_every;
#endif

/* Async examples are captured in the handler (pointers only) and rendered
 * later with the GIL; ts_v_pending > 0 keeps popped code objects alive
 * (validate_shadow.c) until then. */
typedef struct {
    _Atomic int state; /* 0 empty, 1 being written, 2 published, 3 rendered */
    int tid, fault;
    int nw, tdw, ns, tds;
    void *wcodes[TS_V_EX_CAP];
    int woffs[TS_V_EX_CAP];
    void *scodes[TS_V_EX_CAP];
} ts_vexample;
extern ts_vexample ts_v_async_ex[TS_V_NKINDS];
extern _Atomic long ts_v_pending;

/* validate_walk.c: the walker under test, on the calling thread. Fills
 * sh->wcodes/woffs root-first (Python frames only), applies the test fault,
 * returns the number stored; *true_depth and *reason as the walker reports. */
TS_SIGNAL_SAFE int ts_v_walk(ts_vshadow *sh, int *true_depth, int *reason, int *faulted);

/* validate_classify.c */
TS_SIGNAL_SAFE int ts_v_classify(void *const *w, int nw, int tdw, void *const *s, int ns, int tds, int allow_boundary);
#ifdef TS_TEST_HOOKS
/* validate_fault.c */
TS_SIGNAL_SAFE int ts_v_apply_fault(void **codes, int *offs, int *n, int *true_depth);
#endif

/* validate_shadow.c (GIL held) */
ts_vshadow *ts_v_current(PyFrameObject *frame_or_null);
int ts_v_truth(PyFrameObject *leaf, void **codes, int *lines, int cap, int *true_depth);
void ts_v_reseed(ts_vshadow *sh, void *const *codes, int n);
int ts_v_push(PyObject *code);
int ts_v_push_checked(PyObject *code, PyFrameObject *frame_or_null);
int ts_v_pop(PyObject *code, PyFrameObject *frame_or_null);
PyObject *ts_v_collect_garbage(void);

/* validate_events.c: the interpreter's call/return events (GIL held) */
PyObject *ts_v_ev_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *ts_v_ev_resume(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *ts_v_ev_throw(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *ts_v_ev_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *ts_v_ev_install_profile(PyObject *self, PyObject *unused);

/* validate_sync.c (GIL held) */
void ts_v_sync_check(ts_vshadow *sh, PyFrameObject *leaf);
PyObject *ts_v_sync_examples(void);
PyObject *ts_v_describe(PyObject *code, int line_or_offset, int is_offset);

/* validate_async.c */
int ts_v_async_start(double rate_hz, unsigned long seed, int signo);
void ts_v_async_stop(void);
PyObject *ts_v_async_examples(void);

#endif
