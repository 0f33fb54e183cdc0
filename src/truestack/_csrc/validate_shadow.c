/* Per-thread shadow stacks: the oracle's ground layer.
 *
 * Each thread's stack of code objects is mirrored by call/return events
 * (sys.monitoring callbacks on 3.12+, a C profile function on 3.10/3.11).
 * The signal handler of the async layer reads the mirror of the thread it
 * interrupted, so the mirror is a plain array reachable through
 * initial-exec TLS (no allocation on first touch) and updated so that every
 * intermediate state is a valid stack: write the entry, then the depth.
 */
#include "validate_state.h"
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread ts_vshadow *ts_v_tls __attribute__((tls_model("initial-exec")));
_Atomic int ts_v_slots[TS_V_MAX_THREADS];
_Atomic int ts_v_on;
int ts_v_sync_every = 25;
_Atomic uint64_t ts_v_resyncs, ts_v_pop_mismatch, ts_v_threads_seen, ts_v_silent_links;
_Atomic long ts_v_pending;

#define SHADOW_KEY "truestack.validate.shadow"

/* Code objects popped while an async example may still name them; released
 * by ts_v_collect_garbage once every captured example has been rendered. */
static PyObject **graveyard;
static Py_ssize_t grave_n, grave_cap;

static int gettid_(void) { return (int)syscall(SYS_gettid); }

/* Drops the mirror's reference to a code object leaving it, unless an
 * async example captured since the last collection may name it. */
static void release(PyObject *code) {
    if (atomic_load_explicit(&ts_v_pending, memory_order_acquire) > 0) {
        if (grave_n == grave_cap) {
            Py_ssize_t cap = grave_cap ? grave_cap * 2 : 1024;
            PyObject **g = realloc(graveyard, sizeof(PyObject *) * (size_t)cap);
            if (g) graveyard = g, grave_cap = cap;
        }
        if (grave_n < grave_cap) {
            graveyard[grave_n++] = code; /* the reference moves there */
            return;
        }
    }
    Py_DECREF(code);
}

static void shadow_free(ts_vshadow *sh) {
    for (int i = 0; i < sh->depth; i++) release((PyObject *)sh->codes[i]);
    free((void *)sh->codes);
    free(sh->below);
    free(sh->wbuf);
    free(sh->wcodes);
    free(sh->woffs);
    free(sh->tcodes);
    free(sh->tlines);
    free(sh);
}

/* Runs when the thread's dict is cleared: on thread exit, on that thread. */
static void shadow_capsule_destructor(PyObject *capsule) {
    ts_vshadow *sh = PyCapsule_GetPointer(capsule, SHADOW_KEY);
    if (!sh) {
        PyErr_Clear();
        return;
    }
    if (sh->slot >= 0) { /* unless the sender already freed it (ESRCH) for reuse */
        int expect = sh->tid;
        atomic_compare_exchange_strong(&ts_v_slots[sh->slot], &expect, 0);
    }
    if (sh->tid == gettid_() && ts_v_tls == sh) {
        ts_v_tls = NULL;
        atomic_signal_fence(memory_order_seq_cst);
        shadow_free(sh);
    }
    /* Else another thread is clearing it (interpreter teardown): the owner
     * may still take a late signal that reads it, so it is left allocated. */
}

static ts_vshadow *shadow_new(void) {
    ts_vshadow *sh = calloc(1, sizeof *sh);
    if (!sh) return NULL;
    sh->cap = 256;
    sh->codes = malloc(sizeof(void *) * (size_t)sh->cap);
    sh->below = malloc(sizeof(int) * (size_t)sh->cap);
    sh->wbuf = malloc(sizeof(ts_rawframe) * TS_V_WALK_CAP);
    sh->wcodes = malloc(sizeof(void *) * TS_V_WALK_CAP);
    sh->woffs = malloc(sizeof(int) * TS_V_WALK_CAP);
    sh->tcodes = malloc(sizeof(void *) * TS_V_WALK_CAP);
    sh->tlines = malloc(sizeof(int) * TS_V_WALK_CAP);
    if (!sh->codes || !sh->below || !sh->wbuf || !sh->wcodes || !sh->woffs || !sh->tcodes || !sh->tlines) {
        shadow_free(sh);
        return NULL;
    }
    sh->tid = gettid_();
    sh->slot = -1;
    return sh;
}

/* Grows the array without ever showing the handler a freed one: the new
 * array is complete before it is published, the old one freed after. */
static int shadow_reserve(ts_vshadow *sh, int need) {
    if (need <= sh->cap) return 0;
    int cap = sh->cap;
    while (cap < need) cap *= 2;
    int *below = realloc(sh->below, sizeof(int) * (size_t)cap); /* the handler never reads it */
    if (!below) return -1;
    sh->below = below;
    void **fresh = malloc(sizeof(void *) * (size_t)cap);
    if (!fresh) return -1;
    memcpy(fresh, (void *)sh->codes, sizeof(void *) * (size_t)sh->depth);
    void **old = sh->codes;
    atomic_signal_fence(memory_order_seq_cst);
    sh->codes = fresh;
    atomic_signal_fence(memory_order_seq_cst);
    sh->cap = cap;
    free(old);
    return 0;
}

/* Leaf-most `cap` frames of the chain starting at `leaf` (or the current
 * frame), root-first, with their lines; *true_depth = full chain length. */
int ts_v_truth(PyFrameObject *leaf, void **codes, int *lines, int cap, int *true_depth) {
    PyFrameObject *f = leaf ? leaf : PyEval_GetFrame();
    Py_XINCREF(f);
    int depth = 0;
    while (f) {
        if (depth < cap) {
            PyCodeObject *co = PyFrame_GetCode(f);
            codes[depth] = co;
            lines[depth] = PyFrame_GetLineNumber(f);
            Py_DECREF(co); /* the frame keeps it alive */
        }
        depth++;
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    int n = depth < cap ? depth : cap;
    for (int i = 0, j = n - 1; i < j; i++, j--) { /* leaf-first -> root-first */
        void *c = codes[i];
        codes[i] = codes[j], codes[j] = c;
        int l = lines[i];
        lines[i] = lines[j], lines[j] = l;
    }
    *true_depth = depth;
    return n;
}

/* Replaces the whole mirror with `codes` (root-first), taking references. */
void ts_v_reseed(ts_vshadow *sh, void *const *codes, int n) {
    if (shadow_reserve(sh, n + 1) < 0) return;
    sig_atomic_t was_busy = sh->busy;
    sh->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    int old_depth = sh->depth;
    sh->depth = 0;
    atomic_signal_fence(memory_order_seq_cst);
    PyObject **old = PyMem_Malloc(sizeof(PyObject *) * (size_t)(old_depth ? old_depth : 1));
    for (int i = 0; i < old_depth; i++) {
        if (old) old[i] = (PyObject *)sh->codes[i];
    }
    for (int i = 0; i < n; i++) {
        Py_INCREF((PyObject *)codes[i]);
        sh->codes[i] = codes[i];
        sh->below[i] = 0;
    }
    atomic_signal_fence(memory_order_seq_cst);
    sh->depth = n;
    atomic_signal_fence(memory_order_seq_cst);
    sh->busy = was_busy;
    /* Released last: a dying code object may run hooks that re-enter us. */
    if (old) {
        for (int i = 0; i < old_depth; i++) release(old[i]);
        PyMem_Free(old);
    }
}

static int register_slot(ts_vshadow *sh) {
    for (int i = 0; i < TS_V_MAX_THREADS; i++) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&ts_v_slots[i], &expect, sh->tid)) {
            sh->slot = i;
            return 0;
        }
    }
    return -1;
}

/* This thread's shadow, created and seeded from the frame chain (which
 * already holds the frame of the event being handled) on first use. */
ts_vshadow *ts_v_current(PyFrameObject *frame) {
    ts_vshadow *sh = ts_v_tls;
    if (sh) return sh;
    sh = shadow_new();
    if (!sh) return NULL;
    PyObject *dict = PyThreadState_GetDict();
    PyObject *cap = dict ? PyCapsule_New(sh, SHADOW_KEY, shadow_capsule_destructor) : NULL;
    if (!cap || PyDict_SetItemString(dict, SHADOW_KEY, cap) < 0) {
        PyErr_Clear();
        Py_XDECREF(cap);
        shadow_free(sh);
        return NULL;
    }
    Py_DECREF(cap); /* the thread's dict owns it now */
    int tdepth;
    int n = ts_v_truth(frame, sh->tcodes, sh->tlines, TS_V_WALK_CAP, &tdepth);
    ts_v_reseed(sh, sh->tcodes, n);
    atomic_fetch_add(&ts_v_threads_seen, 1);
    ts_v_tls = sh;
    register_slot(sh); /* full table: the thread is still checked synchronously */
    return sh;
}

/* Drops delegating entries left by the previous pop: their frames were
 * unlinked from C by now, since another event is being handled. */
static void settle(ts_vshadow *sh) {
    int k = sh->deferred;
    if (!k) return;
    int d = sh->depth;
    int nd = d - k < 0 ? 0 : d - k;
    atomic_signal_fence(memory_order_seq_cst);
    sh->depth = nd;
    atomic_signal_fence(memory_order_seq_cst);
    sh->deferred = 0;
    for (int i = d - 1; i >= nd; i--) release((PyObject *)sh->codes[i]);
}

static int push_one(ts_vshadow *sh, PyObject *code, int below) {
    if (sh->depth >= sh->cap && shadow_reserve(sh, sh->depth + 1) < 0) return -1;
    Py_INCREF(code);
    sh->codes[sh->depth] = code;
    sh->below[sh->depth] = below;
    atomic_signal_fence(memory_order_seq_cst);
    sh->depth = sh->depth + 1;
    return 0;
}

int ts_v_push(PyObject *code) {
    ts_vshadow *sh = ts_v_tls;
    if (!sh) return ts_v_current(NULL) ? 1 : -1; /* seeded with this frame included */
    settle(sh);
    return push_one(sh, code, 0);
}

/* A push where the caller may not be the shadow's top: throwing into (or
 * closing) a generator that delegates with `yield from`/`await` links the
 * delegating frames into the chain from C, with no event (genobject.c,
 * _gen_throw). They are mirrored here and dropped with the frame that
 * entered under them. */
static int push_checked(ts_vshadow *sh, PyObject *code, PyFrameObject *frame) {
    int tds;
    int nt = ts_v_truth(frame, sh->tcodes, sh->tlines, TS_V_WALK_CAP, &tds);
    int d = sh->depth;
    if (tds != nt || nt < d + 1 || sh->tcodes[nt - 1] != (void *)code) return push_one(sh, code, 0);
    for (int i = 0; i < d; i++) {
        if (sh->tcodes[i] != sh->codes[i]) { /* drifted: start again from the chain */
            atomic_fetch_add(&ts_v_resyncs, 1);
            ts_v_reseed(sh, sh->tcodes, nt);
            return 0;
        }
    }
    int silent = nt - 1 - d;
    for (int i = d; i < nt - 1; i++)
        if (push_one(sh, (PyObject *)sh->tcodes[i], 0) < 0) return -1;
    if (silent) atomic_fetch_add(&ts_v_silent_links, (uint64_t)silent);
    return push_one(sh, code, silent);
}

int ts_v_push_checked(PyObject *code, PyFrameObject *frame) {
    ts_vshadow *sh = ts_v_tls;
    if (!sh) return ts_v_current(frame) ? 1 : -1;
    settle(sh);
    /* Signals landing while the oracle walks the chain here would sample
     * the oracle's own work, in a state its events have not caught up with
     * yet: skip them, as during synchronous checks. */
    sig_atomic_t was_busy = sh->busy;
    sh->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    int r = push_checked(sh, code, frame);
    atomic_signal_fence(memory_order_seq_cst);
    sh->busy = was_busy;
    return r;
}

int ts_v_pop(PyObject *code, PyFrameObject *frame) {
    ts_vshadow *sh = ts_v_tls;
    if (!sh) {
        sh = ts_v_current(frame);
        if (!sh) return -1;
    }
    settle(sh);
    int d = sh->depth;
    if (d == 0 || sh->codes[d - 1] != (void *)code) {
        /* A missed event: resync from the chain (which still holds the
         * frame being left) so later checks stay meaningful. Counted. */
        atomic_fetch_add(&ts_v_pop_mismatch, 1);
        int tdepth;
        int n = ts_v_truth(frame, sh->tcodes, sh->tlines, TS_V_WALK_CAP, &tdepth);
        ts_v_reseed(sh, sh->tcodes, n);
        d = sh->depth;
        if (d == 0) return 0;
    }
    /* The delegating frames under this one are unlinked by C code after
     * it: keep their entries until the next event, marked as leaving. */
    int k = sh->below[d - 1];
    if (k > d - 1) k = d - 1;
    atomic_signal_fence(memory_order_seq_cst);
    sh->deferred = k;
    sh->depth = d - 1;
    atomic_signal_fence(memory_order_seq_cst);
    release((PyObject *)sh->codes[d - 1]);
    return 0;
}

/* Releases buried code objects once no captured async example can still
 * name them. Returns None; GIL held. */
PyObject *ts_v_collect_garbage(void) {
    long seen = atomic_load(&ts_v_pending);
    for (int k = 0; k < TS_V_NKINDS; k++) {
        int st = atomic_load(&ts_v_async_ex[k].state);
        if (st == 1 || st == 2) Py_RETURN_NONE;
    }
    if (seen == 0) Py_RETURN_NONE;
    if (!atomic_compare_exchange_strong(&ts_v_pending, &seen, 0)) Py_RETURN_NONE;
    PyObject **g = graveyard;
    Py_ssize_t n = grave_n;
    graveyard = NULL, grave_n = grave_cap = 0;
    for (Py_ssize_t i = 0; i < n; i++) Py_DECREF(g[i]);
    free(g);
    Py_RETURN_NONE;
}
