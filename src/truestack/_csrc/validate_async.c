/* Asynchronous layer: a native thread (no GIL, so its timing is independent
 * of the interpreter's switch points) sends a realtime signal to a random
 * registered thread at random intervals; the handler, on the interrupted
 * thread, runs the walker and compares its result with that thread's shadow
 * stack right there. Only pointer comparisons happen in the handler; names
 * are resolved later, with the GIL, for the few example stacks kept. */
#include "validate_state.h"
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Atomic uint64_t ts_v_sig_sent, ts_v_sig_esrch, ts_v_sig_handled, ts_v_sig_busy, ts_v_sig_unregistered;
ts_vexample ts_v_async_ex[TS_V_NKINDS];

static int sig_installed;
static int v_signo;
static struct sigaction old_action;
static pthread_t sender;
static _Atomic int sender_run;
static int sender_started;
static double rate;
static uint64_t rng;

TS_SIGNAL_SAFE static void capture_example(ts_vshadow *sh, int kind, int nw, int tdw, int faulted) {
    ts_vexample *ex = &ts_v_async_ex[kind];
    int expect = 0;
    if (!atomic_compare_exchange_strong(&ex->state, &expect, 1)) return;
    /* Announce before copying: any pop on this thread after we return sees
     * it and keeps the popped code object alive until rendered. */
    atomic_fetch_add(&ts_v_pending, 1);
    int ns = sh->depth;
    int kw = nw < TS_V_EX_CAP ? nw : TS_V_EX_CAP, ks = ns < TS_V_EX_CAP ? ns : TS_V_EX_CAP;
    for (int i = 0; i < kw; i++) {
        ex->wcodes[i] = sh->wcodes[nw - kw + i];
        ex->woffs[i] = sh->woffs[nw - kw + i];
    }
    void *const *codes = (void *const *)sh->codes;
    for (int i = 0; i < ks; i++) ex->scodes[i] = codes[ns - ks + i];
    ex->nw = kw, ex->tdw = tdw, ex->ns = ks, ex->tds = ns;
    ex->tid = sh->tid, ex->fault = faulted;
    atomic_store_explicit(&ex->state, 2, memory_order_release);
}

/* Throwing into a generator that delegates (`yield from`, `await`) links
 * the whole delegating chain and the inner generator from C before any
 * event: the walker may show several generator frames above the shadow at
 * that instant. All extra frames being generator/coroutine code, directly
 * on top of an otherwise equal stack, is that entry, not a walker error.
 * co_flags is read with a fault-tolerant load. */
TS_SIGNAL_SAFE static int entering_delegation(ts_vshadow *sh, int nw, int tdw, int ns) {
    if (nw != tdw || nw < ns + 2) return 0;
    void *const *codes = (void *const *)sh->codes;
    for (int i = 0; i < ns; i++)
        if (sh->wcodes[i] != codes[i]) return 0;
    for (int i = ns; i < nw; i++) {
        int fault = 0;
        uint64_t flags = ts_core->load_sized((uintptr_t)sh->wcodes[i] + offsetof(PyCodeObject, co_flags), 4, &fault);
        if (fault || !(flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR))) return 0;
    }
    return 1;
}

TS_SIGNAL_SAFE static void on_signal(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si, (void)uc;
    int saved_errno = errno;
    ts_vshadow *sh = ts_v_tls;
    if (!sh || !atomic_load_explicit(&ts_v_on, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&ts_v_sig_unregistered, 1, memory_order_relaxed);
        goto out;
    }
    if (sh->busy) {
        atomic_fetch_add_explicit(&ts_v_sig_busy, 1, memory_order_relaxed);
        goto out;
    }
    sh->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    atomic_fetch_add_explicit(&ts_v_sig_handled, 1, memory_order_relaxed);
    int tdw, reason, faulted;
    int nw = ts_v_walk(sh, &tdw, &reason, &faulted);
    int kind;
    if (reason != TS_OK) {
        kind = TS_V_PARTIAL;
        if (reason > 0 && reason < TS_NREASONS)
            atomic_fetch_add_explicit(&ts_v_partial_reasons[reason], 1, memory_order_relaxed);
    } else {
        int ns = sh->depth;
        void *const *codes = (void *const *)sh->codes;
        kind = ts_v_classify(sh->wcodes, nw, tdw, codes, ns, ns, 1);
        /* Delegating frames being unlinked right now (see settle()) may
         * already be gone from the walker's view: still a boundary. */
        for (int j = 1; j <= sh->deferred && j <= ns && kind > TS_V_BOUNDARY; j++) {
            int k2 = ts_v_classify(sh->wcodes, nw, tdw, codes, ns - j, ns - j, 1);
            if (k2 == TS_V_OK || k2 == TS_V_BOUNDARY) kind = TS_V_BOUNDARY;
        }
        if (kind == TS_V_EXTRA && entering_delegation(sh, nw, tdw, ns)) kind = TS_V_BOUNDARY;
    }
    atomic_fetch_add_explicit(&ts_v_checked[TS_V_ASYNC], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ts_v_counts[TS_V_ASYNC][kind], 1, memory_order_relaxed);
    if (kind != TS_V_OK && atomic_load_explicit(&ts_v_async_ex[kind].state, memory_order_relaxed) == 0)
        capture_example(sh, kind, nw, tdw, faulted);
    atomic_signal_fence(memory_order_seq_cst);
    sh->busy = 0;
out:
    errno = saved_errno;
}

static uint64_t next_random(void) { /* xorshift64*, sender thread only */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return rng * 2685821657736338717ULL;
}

static void *sender_main(void *arg) {
    (void)arg;
    pid_t pid = getpid();
    int tids[TS_V_MAX_THREADS];
    int idx[TS_V_MAX_THREADS];
    double mean_ns = 1e9 / rate;
    while (atomic_load(&sender_run)) {
        /* Uniform in (0, 2*mean): random phase against any periodic work. */
        double u = (double)(next_random() >> 11) / 9007199254740992.0;
        long ns = (long)(2.0 * mean_ns * u) + 1;
        struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
        nanosleep(&ts, NULL);
        int n = 0;
        for (int i = 0; i < TS_V_MAX_THREADS; i++) {
            int tid = atomic_load_explicit(&ts_v_slots[i], memory_order_relaxed);
            if (tid) tids[n] = tid, idx[n] = i, n++;
        }
        if (!n) continue;
        int pick = (int)(next_random() % (uint64_t)n);
        if (syscall(SYS_tgkill, pid, tids[pick], v_signo) == 0) {
            atomic_fetch_add(&ts_v_sig_sent, 1);
        } else if (errno == ESRCH) {
            /* Gone without its exit hook running: never signal that tid again. */
            int expect = tids[pick];
            atomic_compare_exchange_strong(&ts_v_slots[idx[pick]], &expect, 0);
            atomic_fetch_add(&ts_v_sig_esrch, 1);
        }
    }
    return NULL;
}

/* A forked child has no sender thread: never join the parent's. */
static void after_fork_child(void) {
    sender_started = 0;
    atomic_store(&sender_run, 0);
}

int ts_v_async_start(double rate_hz, unsigned long seed, int signo) {
    static int atfork_done;
    if (sender_started) return 0;
    if (!atfork_done && pthread_atfork(NULL, NULL, after_fork_child) == 0) atfork_done = 1;
    if (ts_core->safeload_install() != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if (!sig_installed) {
        /* Installed once and never removed: a late signal must stay harmless. */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(signo, &sa, &old_action) != 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        sig_installed = 1;
        v_signo = signo;
    }
    rate = rate_hz > 0 ? rate_hz : 1000.0;
    rng = seed ? seed : 0x9E3779B97F4A7C15ULL;
    atomic_store(&sender_run, 1);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the sender inherits "all blocked" */
    int rc = pthread_create(&sender, NULL, sender_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    sender_started = 1;
    return 0;
}

void ts_v_async_stop(void) {
    if (!sender_started) return;
    atomic_store(&sender_run, 0);
    Py_BEGIN_ALLOW_THREADS pthread_join(sender, NULL);
    Py_END_ALLOW_THREADS sender_started = 0;
}

/* Renders published examples (GIL held). Shadow entries are alive (on a
 * stack or buried); walker entries are named only when the shadow of the
 * same example holds the same pointer, since anything else may be gone. */
PyObject *ts_v_async_examples(void) {
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    for (int k = 0; k < TS_V_NKINDS; k++) {
        ts_vexample *ex = &ts_v_async_ex[k];
        if (atomic_load_explicit(&ex->state, memory_order_acquire) != 2) continue;
        PyObject *got = PyList_New(0), *want = PyList_New(0);
        for (int i = 0; got && i < ex->nw; i++) {
            int known = 0;
            for (int j = 0; j < ex->ns && !known; j++) known = ex->scodes[j] == ex->wcodes[i];
            PyObject *s = known ? ts_v_describe((PyObject *)ex->wcodes[i], ex->woffs[i], 1)
                                : PyUnicode_FromFormat("<code %p, offset %d: not on the shadow stack>", ex->wcodes[i],
                                                       ex->woffs[i]);
            if (!s || PyList_Append(got, s) < 0) Py_CLEAR(got);
            Py_XDECREF(s);
        }
        for (int i = 0; want && i < ex->ns; i++) {
            PyCodeObject *co = (PyCodeObject *)ex->scodes[i];
#if PY_VERSION_HEX >= 0x030B0000
            PyObject *s = PyUnicode_FromFormat("%U (%U:%d)", co->co_qualname, co->co_filename, co->co_firstlineno);
#else
            PyObject *s = PyUnicode_FromFormat("%U (%U:%d)", co->co_name, co->co_filename, co->co_firstlineno);
#endif
            if (!s || PyList_Append(want, s) < 0) Py_CLEAR(want);
            Py_XDECREF(s);
        }
        PyObject *d = NULL;
        if (got && want)
            d = Py_BuildValue("{s:s,s:s,s:i,s:O,s:i,s:O,s:i,s:O}", "layer", "async", "kind", ts_v_kind_names[k],
                              "thread_id", ex->tid, "got", got, "got_depth", ex->tdw, "expected", want,
                              "expected_depth", ex->tds, "fault_injected", ex->fault ? Py_True : Py_False);
        Py_XDECREF(got);
        Py_XDECREF(want);
        if (!d || PyList_Append(out, d) < 0) {
            Py_XDECREF(d);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(d);
        /* Rendered: nothing in it needs keeping alive any more. The slot
         * stays taken so each kind keeps its first example. */
        atomic_store(&ex->state, 3);
    }
    return out;
}
