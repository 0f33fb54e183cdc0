/* Python interface of truestack._native. Every function here runs with the
 * GIL held; only sampler.c/walker.c/ring.c/safeload.c code marked
 * TS_SIGNAL_SAFE runs in signal handlers. */
#include "Python.h"
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include "core_api.h"
#include "ring.h"
#include "safeload.h"
#include "sampler.h"
#include "staging.h"
#include "ts_version.h"
#include "unwind.h"
#include "cfi.h"
#include "drain.h"
#include "main_call.h"
#include "process_watch.h"
#include "stream_write.h"
#include "stackcache.h"
#include "wordcache.h"
#include "walker.h"

const char *const ts_partial_names[TS_NREASONS] = {
    NULL,         "no_thread_state", "fault", "bad_frame",      "bad_code",
    "bad_offset", "too_deep",        "torn",  "subinterpreter", "unguarded",
};
const char *const ts_kind_names[TS_NKINDS] = {"python", "native", "shim", "truncated"};

static PyObject *errno_error(int neg) {
    errno = -neg;
    return PyErr_SetFromErrno(PyExc_OSError);
}

unsigned long ts_tstate_ident_off = offsetof(PyThreadState, thread_id);

#if PY_VERSION_HEX >= 0x030B0000
static long tstate_tid(PyThreadState *t) { return (long)t->native_thread_id; }
static int tid_lookup_init(void) { return 0; }
#else
/* 3.10 keeps only the pthread_t. pthread_getcpuclockid() on the pthread_t of
 * a thread that already exited is undefined behaviour, so read the kernel tid
 * from glibc's thread descriptor with a guarded load instead: the kernel
 * zeroes that field when the thread exits (CLONE_CHILD_CLEARTID), and an
 * unmapped descriptor faults harmlessly. Its offset is found on this thread. */
static long pthread_tid_off = -1;

static int tid_lookup_init(void) {
    if (pthread_tid_off >= 0) return 0;
    if (ts_safeload_install() != 0) return -1;
    int self = (int)syscall(SYS_gettid), fault = 0;
    uintptr_t desc = (uintptr_t)pthread_self();
    for (long off = 0; off < 4096 && !fault; off += 4)
        if ((int)ts_load_sized(desc + (uintptr_t)off, 4, &fault) == self && !fault) {
            pthread_tid_off = off;
            break;
        }
    return 0; /* not found: only threads that register themselves are sampled */
}

static long tstate_tid(PyThreadState *t) {
    int fault = 0;
    if (!t->thread_id || pthread_tid_off < 0) return 0;
    long tid = (long)(int)ts_load_sized((uintptr_t)t->thread_id + (uintptr_t)pthread_tid_off, 4, &fault);
    return fault ? 0 : tid;
}
#endif

static PyObject *py_start(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"mode", "interval_ns", "max_depth", "ring_slots", "timer", "native", NULL};
    const char *mode, *timer = "auto";
    long long interval;
    int depth, native = 0;
    unsigned long long slots = 65536;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sLi|Ksi", kwlist, &mode, &interval, &depth, &slots, &timer, &native))
        return NULL;
    if (native < 0 || native > TS_MAX_NATIVE)
        return PyErr_Format(PyExc_ValueError, "native must be 0..%d", TS_MAX_NATIVE);
    if (native && !ts_native_available)
        return PyErr_Format(PyExc_NotImplementedError, "built without libunwind: native frames unavailable");
    int m = strcmp(mode, "cpu") == 0 ? TS_MODE_CPU : strcmp(mode, "wall") == 0 ? TS_MODE_WALL : -1;
    if (m < 0) return PyErr_Format(PyExc_ValueError, "unknown mode %s", mode);
    if (interval < 10000) return PyErr_Format(PyExc_ValueError, "interval below 10 us");
    if (depth < 1 || depth > TS_MAX_DEPTH)
        return PyErr_Format(PyExc_ValueError, "max_depth must be 1..%d", TS_MAX_DEPTH);
    if (slots < 1024 || slots > (1ULL << 24)) return PyErr_Format(PyExc_ValueError, "ring_slots out of range");
    int pref = strcmp(timer, "perf") == 0 ? TS_TIMER_PERF : strcmp(timer, "timer_create") == 0 ? TS_TIMER_POSIX : 0;
    if (ts_codehook_install() < 0 || tid_lookup_init() < 0) return NULL;
    /* A different slot size replaces the ring: settle what it holds first. */
    ts_fold(NULL, 1);
    int rc = ts_sampler_start(m, interval, depth, native, slots, pref);
    if (rc < 0) return errno_error(rc);
    return PyUnicode_FromString(ts_timer_name(ts_sampler_timer()));
}

static PyObject *py_warm_cpu_timers(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    PyThreadState *released = PyEval_SaveThread();
    int rc = ts_timers_warm();
    PyEval_RestoreThread(released);
    if (rc) return errno_error(rc);
    Py_RETURN_NONE;
}

static PyObject *py_stop(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    ts_sampler_stop();
    Py_RETURN_NONE;
}

static PyObject *py_sync_threads(PyObject *self, PyObject *exclude) {
    (void)self;
    /* One GIL-held pass, so a thread registering itself meanwhile can't be
     * mistaken for a dead one. */
    if (!PyAnySet_Check(exclude)) return PyErr_Format(PyExc_TypeError, "exclude must be a set of idents");
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    /* One caller at a time (the arrays below are static): the engine drains under its own lock. */
    static int live[TS_MAX_THREADS], reg[TS_MAX_THREADS];
    static unsigned long idents[TS_MAX_THREADS], excluded[64];
    int nexcl = 0;
    PyObject *it = PyObject_GetIter(exclude), *o;
    while (it && (o = PyIter_Next(it)) != NULL) {
        if (nexcl < 64) excluded[nexcl++] = PyLong_AsUnsignedLong(o);
        Py_DECREF(o);
    }
    Py_XDECREF(it);
    if (PyErr_Occurred()) {
        Py_DECREF(out);
        return NULL;
    }
    /* Copy the list under its lock (see ts_thread_list_lock: the GIL is not
     * enough), then register from the copies: a thread state freed since is
     * never followed, only stored, and the control thread's remote walk
     * checks it with guarded loads before trusting it. */
    static PyThreadState *tstates[TS_MAX_THREADS];
    int nlive = 0;
    ts_thread_list_lock();
    for (PyThreadState *t = PyInterpreterState_ThreadHead(PyInterpreterState_Main()); t && nlive < TS_MAX_THREADS;
         t = PyThreadState_Next(t)) {
        int tid = (int)tstate_tid(t), skip = 0;
        for (int j = 0; j < nexcl && !skip; j++) skip = excluded[j] == t->thread_id;
        if (tid <= 0 || skip) continue;
        live[nlive] = tid;
        tstates[nlive] = t;
        idents[nlive++] = t->thread_id;
    }
    ts_thread_list_unlock();
    for (int i = 0; i < nlive; i++) ts_register_thread(live[i], tstates[i], idents[i]);
    ts_rearm_lost_timers();
    for (int i = 0; i < nlive; i++) {
        PyObject *ident = PyLong_FromUnsignedLong(idents[i]);
        if (!ident) {
            Py_DECREF(out);
            return NULL;
        }
        PyObject *pair = Py_BuildValue("(Ni)", ident, live[i]);
        if (!pair || PyList_Append(out, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(pair);
    }
    int n = ts_thread_tids(reg, TS_MAX_THREADS, 0);
    for (int i = 0; i < n; i++) {
        int found = 0;
        for (int j = 0; j < nlive && !found; j++) found = reg[i] == live[j];
        if (!found) ts_unregister_thread(reg[i]);
    }
    return out;
}

static PyObject *py_register_current(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    int tid = (int)syscall(SYS_gettid);
    PyThreadState *ts = PyThreadState_Get();
    int rc = ts_register_thread(tid, ts, ts->thread_id);
    if (rc < 0 && rc != -ESRCH) return errno_error(rc);
    return PyLong_FromLong(tid);
}

static PyObject *py_unregister_current(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    /* Called as a thread ends, sampling or not: its tid may be reused. */
    ts_unregister_thread((int)syscall(SYS_gettid));
    Py_RETURN_NONE;
}

static PyObject *walk_list(int max_depth, ts_walk_result *r) {
    if (max_depth < 1 || max_depth > 100000) return PyErr_Format(PyExc_ValueError, "max_depth out of range");
    ts_rawframe *buf = PyMem_Malloc(sizeof(ts_rawframe) * (size_t)max_depth);
    if (!buf) return PyErr_NoMemory();
    if (ts_safeload_install() != 0) {
        PyMem_Free(buf);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    ts_walk(ts_current_tstate(), buf, max_depth, r);
    /* The frames are this thread's live frames: their code objects are alive. */
    PyObject *out = PyList_New(r->nframes);
    for (int i = 0; out && i < r->nframes; i++) {
        PyObject *item = Py_BuildValue("(Ois)", (PyObject *)buf[i].code, TS_UNPACK_OFF(buf[i].off_kind),
                                       ts_kind_names[TS_UNPACK_KIND(buf[i].off_kind)]);
        if (!item)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, i, item);
    }
    PyMem_Free(buf);
    return out;
}

static PyObject *py_walk_current(PyObject *self, PyObject *arg) {
    (void)self;
    ts_walk_result r;
    int max_depth = (int)PyLong_AsLong(arg);
    if (max_depth == -1 && PyErr_Occurred()) return NULL;
    return walk_list(max_depth, &r);
}

static PyObject *py_walk_current_info(PyObject *self, PyObject *arg) {
    (void)self;
    ts_walk_result r;
    int max_depth = (int)PyLong_AsLong(arg);
    if (max_depth == -1 && PyErr_Occurred()) return NULL;
    PyObject *l = walk_list(max_depth, &r);
    if (!l) return NULL;
    return Py_BuildValue("(Niz)", l, r.depth, r.partial ? ts_partial_names[r.partial] : NULL);
}

static PyObject *py_walk_current_coro(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    ts_walk_result r;
    PyObject *l = walk_list(TS_MAX_DEPTH, &r);
    if (!l) return NULL;
    Py_DECREF(l);
    return PyLong_FromUnsignedLongLong((unsigned long long)r.coro);
}

static PyObject *py_code_line(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *code;
    int off;
    if (!PyArg_ParseTuple(args, "O!i", &PyCode_Type, &code, &off)) return NULL;
    return PyLong_FromLong(PyCode_Addr2Line((PyCodeObject *)code, off < 0 ? 0 : off));
}

#define C(name) (unsigned long long)atomic_load(&ts_C.name)
static PyObject *py_stats(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    PyObject *partial = PyDict_New();
    if (!partial) return NULL;
    for (int i = 1; i < TS_NREASONS; i++) {
        unsigned long long v = atomic_load(&ts_C.partial[i]);
        if (!v) continue;
        PyObject *o = PyLong_FromUnsignedLongLong(v);
        if (!o || PyDict_SetItemString(partial, ts_partial_names[i], o) < 0) {
            Py_XDECREF(o);
            Py_DECREF(partial);
            return NULL;
        }
        Py_DECREF(o);
    }
    static int tids[TS_MAX_THREADS];
    int nunarmed = ts_thread_tids(tids, TS_MAX_THREADS, 1);
    PyObject *unsampled = PyList_New(nunarmed);
    for (int i = 0; unsampled && i < nunarmed; i++) {
        PyObject *v = PyLong_FromLong(tids[i]);
        if (!v)
            Py_CLEAR(unsampled);
        else
            PyList_SET_ITEM(unsampled, i, v);
    }
    if (!unsampled) {
        Py_DECREF(partial);
        return NULL;
    }
    uint64_t used = atomic_load(&ts_R.head) - ts_R.tail;
    PyObject *d =
        Py_BuildValue("{sKsKsKsKsKsKsKsKsKsKsNsKsKsssssisssisisi}", "signals", C(signals), "samples", C(samples),
                      "dropped", C(dropped), "foreign_signals", C(foreign), "late_signals", C(late), "overruns",
                      C(overruns), "ticks", C(ticks), "wakeups", C(wakeups), "weight_ns", C(weight_ns),
                      "faults_absorbed", (unsigned long long)atomic_load(&ts_faults_absorbed), "partial", partial,
                      "ring_capacity", (unsigned long long)ts_R.capacity, "ring_used", (unsigned long long)used,
                      "timer", ts_timer_name(ts_sampler_timer()), "layout", ts_L.source, "layout_mismatches",
                      ts_L.debug_offset_mismatches, "code_hook", ts_codehook_kind(), "threads", ts_thread_count(),
                      "active", ts_sampler_active(), "forked_child", ts_forked_child);
    PyObject *more = Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsKsKsKsKsKsLsLsLsLsN}", "handler_reinstalls",
        (unsigned long long)atomic_load(&ts_handler_reinstalls), "delivery_ns", (long long)ts_delivery_ns, "handler_ns",
        C(handler_ns), "remote_samples", C(remote_samples), "remote_discarded", C(remote_discarded), "stale", C(stale),
        "rate_lowered", C(rate_lowered), "timer_fallbacks", C(timer_fallbacks), "timer_fds_lost", C(timer_fds_lost),
        "timer_fds_rearmed", C(timer_fds_rearmed), "collector_ns", C(collector_ns), "control_ns", C(control_ns),
        "ring_pages_mapped", C(ring_pages_mapped), "abandoned_slots",
        (unsigned long long)atomic_load(&ts_ring_abandoned), "interval_ns", (long long)atomic_load(&ts_interval_ns),
        "requested_interval_ns", (long long)ts_requested_interval_ns, "max_interval_ns", (long long)ts_max_interval_ns,
        "unsampled_tids", unsampled);
    PyObject *settle = Py_BuildValue("{sKsKsKsKsK}", "settle_calls", (unsigned long long)ts_settle_calls,
                                     "settle_folds", (unsigned long long)ts_settle_folds, "native_cfi_unwound",
                                     (unsigned long long)atomic_load(&ts_cfi_unwound), "native_libunwind_unwound",
                                     (unsigned long long)atomic_load(&ts_cfi_fallbacks), "native_cfi_snapshots",
                                     (unsigned long long)ts_cfi_snapshots);
    if (!settle || (more && PyDict_Update(more, settle) < 0)) Py_CLEAR(more);
    Py_XDECREF(settle);
    if (!d || !more || PyDict_Update(d, more) < 0) Py_CLEAR(d);
    Py_XDECREF(more);
    return d;
}

static PyObject *py_codes_resolved_at_death(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyLong_FromUnsignedLongLong(ts_codes_resolved_at_death);
}

static PyObject *py_settle_counts(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return Py_BuildValue("(KK)", (unsigned long long)ts_settle_calls, (unsigned long long)ts_settle_folds);
}

static PyObject *py_after_fork_child(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    /* Called from os.register_at_fork: drop the parent's folded samples
     * (the parent reports them; reporting them here would count them twice). */
    ts_staging_forget_after_fork();
    Py_RETURN_NONE;
}

#ifdef TS_TEST_HOOKS
/* Test builds only: a registration as a thread that died while sampling was
 * stopped would leave it (tid unchecked). */
static PyObject *py_test_register_stale(PyObject *self, PyObject *arg) {
    (void)self;
    long tid = PyLong_AsLong(arg);
    if (tid == -1 && PyErr_Occurred()) return NULL;
    int rc = ts_test_register_stale((int)tid);
    if (rc < 0) return errno_error(rc);
    Py_RETURN_NONE;
}

static PyObject *py_test_registry_lock_blocks_sigprof(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return PyBool_FromLong(ts_test_registry_lock_blocks_sigprof());
}

static PyObject *py_test_remote_pause(PyObject *self, PyObject *arg) {
    (void)self;
    long long ns = PyLong_AsLongLong(arg);
    if (ns == -1 && PyErr_Occurred()) return NULL;
    atomic_store(&ts_test_remote_pause_ns, (int64_t)ns);
    Py_RETURN_NONE;
}

static PyObject *py_test_change_period(PyObject *self, PyObject *arg) {
    (void)self;
    long long ns = PyLong_AsLongLong(arg);
    if (ns == -1 && PyErr_Occurred()) return NULL;
    ts_test_change_period((int64_t)ns);
    Py_RETURN_NONE;
}

/* Test builds only: claim a ring slot and leave it unfinished, as a handler
 * stopped mid-write would; _test_stuck_slot(False) finishes it late. */
static PyObject *py_test_stuck_slot(PyObject *self, PyObject *arg) {
    (void)self;
    static ts_slot *stuck;
    static uint64_t stuck_pos;
    if (PyObject_IsTrue(arg)) {
        stuck = ts_ring_claim(&stuck_pos);
        if (!stuck) return PyErr_Format(PyExc_RuntimeError, "ring full");
        Py_RETURN_NONE;
    }
    if (!stuck) return PyErr_Format(PyExc_RuntimeError, "no stuck slot");
    memset(stuck->frames, 0, sizeof(ts_rawframe));
    stuck->nframes = 0;
    stuck->tid = 0;
    int kept = ts_ring_commit(stuck, stuck_pos);
    stuck = NULL;
    return PyBool_FromLong(kept);
}

/* Test builds only: one guarded load from an inaccessible page, exactly as
 * the walker loads, so tests can prove a fault is absorbed (or not). */
static PyObject *py_probe_guarded_load(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return PyErr_SetFromErrno(PyExc_OSError);
    int fault = 0;
    uint64_t before = atomic_load(&ts_faults_absorbed);
    (void)ts_load((uintptr_t)p, &fault);
    uint64_t absorbed = atomic_load(&ts_faults_absorbed) - before;
    munmap(p, (size_t)page);
    return Py_BuildValue("(iK)", fault, (unsigned long long)absorbed);
}

/* Test builds only: unwind a context whose stack pointer is an inaccessible
 * page, as a corrupt stack would have it: the unwinder's fault must come back
 * as TS_NATIVE_FAULT, not kill the process. */
static PyObject *py_probe_native_fault(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    if (!ts_native_available) return PyErr_Format(PyExc_NotImplementedError, "built without libunwind");
    if (ts_safeload_install() != 0 || ts_native_prepare() != 0) return PyErr_SetFromErrno(PyExc_OSError);
    long page = sysconf(_SC_PAGESIZE);
    void *p = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return PyErr_SetFromErrno(PyExc_OSError);
    ucontext_t uc;
    getcontext(&uc);
    uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)&PyObject_Repr; /* its entry: CFA = rsp + 8 */
    uc.uc_mcontext.gregs[REG_RSP] = (greg_t)((uintptr_t)p + 64);
    uint64_t ips[8];
    int why = 0;
    uint64_t before = atomic_load(&ts_faults_absorbed);
    int n = ts_native_unwind(&uc, ips, 8, &why);
    uint64_t absorbed = atomic_load(&ts_faults_absorbed) - before;
    munmap(p, (size_t)page);
    return Py_BuildValue("(izK)", n, why ? ts_native_reason_names[why] : NULL, (unsigned long long)absorbed);
}

static PyObject *py_cfi_check(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    atomic_store(&ts_cfi_check, on);
    const uint64_t *f = ts_cfi_first_mismatch;
    return Py_BuildValue("(KK(KKKKK))", (unsigned long long)atomic_load(&ts_cfi_checked),
                         (unsigned long long)atomic_load(&ts_cfi_mismatched), (unsigned long long)f[0],
                         (unsigned long long)f[1], (unsigned long long)f[2], (unsigned long long)f[3],
                         (unsigned long long)f[4]);
}
#endif

static PyObject *py_native_unwinder(PyObject *self, PyObject *arg) {
    (void)self;
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (!name || (strcmp(name, "cfi") != 0 && strcmp(name, "libunwind") != 0))
        return PyErr_Format(PyExc_ValueError, "native_unwinder: 'cfi' or 'libunwind'");
    atomic_store(&ts_cfi_enabled, strcmp(name, "cfi") == 0);
    Py_RETURN_NONE;
}

static PyObject *py_charge_collector(PyObject *self, PyObject *arg) {
    (void)self;
    unsigned long long ns = PyLong_AsUnsignedLongLong(arg);
    if (ns == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    atomic_fetch_add(&ts_C.collector_ns, (uint64_t)ns);
    Py_RETURN_NONE;
}

static PyObject *py_stack_cache_clear(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    ts_stackcache_clear();
    ts_wordcache_clear();
    Py_RETURN_NONE;
}

static PyObject *py_stack_cache_counts(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    return ts_stackcache_counts();
}

static PyMethodDef methods[] = {
    {"call_in_main_after", ts_py_call_in_main_after, METH_VARARGS,
     "call_in_main_after(fd, marker, call) -> handed: without the GIL, read fd until marker (or its end), then "
     "have the main thread run call() at its next eval-breaker check (False: the pending-call queue was full)"},
    {"start", (PyCFunction)(void (*)(void))py_start, METH_VARARGS | METH_KEYWORDS,
     "start(mode, interval_ns, max_depth, ring_slots=65536, timer='auto', native=0) -> timer name; native: C "
     "return addresses kept per sample (--native)"},
    {"stop", py_stop, METH_NOARGS, "Disarm timers / stop the wall sampler thread (the handler stays)."},
    {"warm_cpu_timers", py_warm_cpu_timers, METH_NOARGS,
     "Open and close one task-clock perf event (GIL released): the kernel's one-off set-up, 6-12 ms, paid now."},
    {"drain", ts_py_drain, METH_VARARGS,
     "drain(resolve_frame=None, finish=None, shims=False) -> [RawSample]; frames is a flat tuple leaf-first (obj, "
     "n, obj, n, ...): obj a code object and n its byte offset, or obj a (qualname, filename, firstlineno) tuple "
     "(code already dead) and n its line. With the resolvers, frames is finish(root-first tuple of "
     "resolve_frame(obj, n), None left out, or kept with shims; partial; depth), made once per distinct stack, then "
     "from the cache; without shims, samples with --native data are left uncached."},
    {"stack_cache_clear", py_stack_cache_clear, METH_NOARGS,
     "Let go of every stack the drain's caches hold (and the code objects they pin), --native's address tuples too."},
    {"stack_cache_counts", py_stack_cache_counts, METH_NOARGS,
     "stack_cache_counts() -> (stacks cached, frames cached, samples answered from the cache, misses, never "
     "cacheable)"},
    {"sync_threads", py_sync_threads, METH_O,
     "sync_threads(exclude_idents: set) -> [(ident, tid)]: register live threads, unregister gone ones."},
    {"register_current", py_register_current, METH_NOARGS, "Register the calling thread; returns its tid."},
    {"unregister_current", py_unregister_current, METH_NOARGS, "Unregister the calling thread (it is ending)."},
    {"walk_current", py_walk_current, METH_O,
     "walk_current(max_depth) -> [(code, byte_offset, kind)], LEAF FIRST, from the same signal-safe walker."},
    {"walk_current_info", py_walk_current_info, METH_O,
     "walk_current_info(max_depth) -> (frames as walk_current, true_depth, partial_reason_or_None)"},
    {"walk_current_coro", py_walk_current_coro, METH_NOARGS,
     "walk_current_coro() -> id of the outermost coroutine the walker sees on this thread's stack, or 0."},
    {"code_line", py_code_line, METH_VARARGS, "code_line(code, byte_offset) -> line (PyCode_Addr2Line)"},
    {"stats", py_stats, METH_NOARGS, "Counters of the sampling core."},
    {"native_unwinder", py_native_unwinder, METH_O,
     "native_unwinder('cfi' | 'libunwind'): --native's unwinder in the handler: the modules' CFI read directly "
     "(the default; libunwind takes what it cannot model), or libunwind for every sample (for comparisons)."},
    {"charge_collector", py_charge_collector, METH_O,
     "charge_collector(ns): CPU time the collector spent resolving a drain (reported with the counters)."},
    {"codes_resolved_at_death", py_codes_resolved_at_death, METH_NOARGS, "Frames resolved by the destroy hook."},
    {"settle_counts", py_settle_counts, METH_NOARGS,
     "settle_counts() -> (destroy-hook runs, runs that folded the ring because a pending sample held the dying code)"},
#ifdef TS_TEST_HOOKS
    {"_test_register_stale", py_test_register_stale, METH_O, "test builds: register a tid unchecked"},
    {"_test_registry_lock_blocks_sigprof", py_test_registry_lock_blocks_sigprof, METH_NOARGS,
     "test builds: is SIGPROF blocked while the registry lock is held, as registration holds it?"},
    {"_test_remote_pause", py_test_remote_pause, METH_O,
     "test builds: _test_remote_pause(ns): the control thread pauses between a remote walk and its sample"},
    {"_test_change_period", py_test_change_period, METH_O,
     "test builds: _test_change_period(ns): every timer's period changed, as the CPU budget does; "
     "0 pauses them, the next call resumes them"},
    {"_test_stuck_slot", py_test_stuck_slot, METH_O,
     "test builds: _test_stuck_slot(True) leaves a claimed slot unfinished; (False) commits it -> kept?"},
    {"_cfi_check", py_cfi_check, METH_O,
     "test builds: _cfi_check(on): libunwind unwinds every fast-path sample too, differences counted -> "
     "(checked, mismatched, (fast n, libunwind n, index, fast ip, libunwind ip) of the first)"},
    {"_probe_native_fault", py_probe_native_fault, METH_NOARGS,
     "test builds: unwind a context whose stack is unmapped -> (frames, reason, faults absorbed)"},
    {"_probe_guarded_load", py_probe_guarded_load, METH_NOARGS,
     "test builds: a guarded load from an inaccessible page -> (fault flag, faults absorbed)"},
#endif
    {"after_fork_child", py_after_fork_child, METH_NOARGS, "Forget the parent's pending samples in a fork child."},
    {"watch_process_events", ts_py_watch_process_events, METH_O,
     "watch_process_events(callback): callback(event, args) for os.fork, subprocess.Popen, os.exec, "
     "os.posix_spawn and os.spawn audit events only (a C audit hook; installed once, never removed)."},
    {"stream_write", ts_py_stream_write, METH_VARARGS,
     "stream_write(fd, data, dev, ino) -> bytes written, the GIL held, without blocking; -1 if fd is not that pipe"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, .m_name = "truestack._native",
                                    .m_doc = "Asynchronous CPython stack sampler (signal-handler frame walker).",
                                    .m_size = -1, .m_methods = methods};

static void at_exit(void) { ts_sampler_stop(); }

/* What the oracle (truestack._oracle) borrows: the very walker that samples
 * and its fault handler (core_api.h). */
TS_SIGNAL_SAFE static uint64_t core_load_sized(uintptr_t addr, int size, int *fault) {
    return ts_load_sized(addr, size, fault);
}

static const ts_core_api core_api = {
    TS_CORE_API_VERSION, ts_current_tstate, ts_walk,          ts_safeload_install,
    ts_safeload_guarded, core_load_sized,   ts_partial_names,
};

static int add_string_tuple(PyObject *m, const char *name, const char *const *items, int n) {
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *s = PyUnicode_FromString(items[i]);
        if (!s)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, s);
    }
    if (!t || PyModule_AddObject(m, name, t) < 0) {
        Py_XDECREF(t);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__native(void) {
    if (ts_layout_init() < 0 || ts_tstate_key_init() < 0) return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    PyTypeObject *raw_sample_type = ts_raw_sample_type();
    PyObject *capsule = PyCapsule_New((void *)&core_api, TS_CORE_API_CAPSULE, NULL);
    int bad = !capsule || PyModule_AddObjectRef(m, "_core_api", capsule) < 0;
    Py_XDECREF(capsule);
    if (bad || !raw_sample_type || PyModule_AddObjectRef(m, "RawSample", (PyObject *)raw_sample_type) < 0 ||
        add_string_tuple(m, "PARTIAL_REASONS", ts_partial_names + 1, TS_NREASONS - 1) < 0 ||
        add_string_tuple(m, "FRAME_KINDS", ts_kind_names, TS_NKINDS) < 0 ||
        PyModule_AddIntConstant(m, "WALK_LEAF_FIRST", 1) < 0 ||
        PyModule_AddIntConstant(m, "GUARDED_LOADS", TS_HAVE_SAFE_LOAD) < 0 ||
        PyModule_AddIntConstant(m, "MAX_THREADS", TS_MAX_THREADS) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DEPTH", TS_MAX_DEPTH) < 0 ||
        PyModule_AddIntConstant(m, "NATIVE_UNWIND", ts_native_available) < 0 ||
        PyModule_AddIntConstant(m, "MAX_NATIVE", TS_MAX_NATIVE) < 0 ||
        add_string_tuple(m, "NATIVE_REASONS", ts_native_reason_names + 1, TS_NNATIVE_REASONS - 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_AtExit(at_exit); /* last resort: timers never outlive the interpreter */
    return m;
}
