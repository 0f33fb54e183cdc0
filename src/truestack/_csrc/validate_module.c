/* Python entry points of the validation oracle, added to truestack._native
 * by ts_validate_add_methods() from the module's init function. The
 * driver is truestack/validate/oracle.py. */
#include "validate_state.h"
#include <string.h>

/* sys.monitoring PY_START(code, offset): push, and every Nth entry run the
 * synchronous check. */
static PyObject *v_ev_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs < 1 || !atomic_load_explicit(&ts_v_on, memory_order_relaxed)) Py_RETURN_NONE;
    ts_vshadow *sh = ts_v_tls;
    int r = ts_v_push(args[0]);
    if (r < 0) Py_RETURN_NONE;
    if (!sh) sh = ts_v_tls;
    if (sh && ts_v_sync_every > 0 && ++sh->starts % (unsigned long)ts_v_sync_every == 0) ts_v_sync_check(sh, NULL);
    Py_RETURN_NONE;
}

/* PY_RESUME(code, offset): the generator's frame is back on the stack. */
static PyObject *v_ev_resume(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs >= 1 && atomic_load_explicit(&ts_v_on, memory_order_relaxed)) ts_v_push(args[0]);
    Py_RETURN_NONE;
}

/* PY_THROW(code, offset, exc): back on the stack, possibly under
 * delegating frames linked without events. */
static PyObject *v_ev_throw(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs >= 1 && atomic_load_explicit(&ts_v_on, memory_order_relaxed)) ts_v_push_checked(args[0], NULL);
    Py_RETURN_NONE;
}

/* PY_RETURN, PY_YIELD, PY_UNWIND (code, offset, value): the frame leaves. */
static PyObject *v_ev_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs >= 1 && atomic_load_explicit(&ts_v_on, memory_order_relaxed)) ts_v_pop(args[0], NULL);
    Py_RETURN_NONE;
}

static PyObject *v_install_profile(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    if (ts_v_install_profile() < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *v_configure(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"sync_every", "fault", "fault_every", NULL};
    int every = 25, fault_every = 20;
    const char *fault = "";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|isi", kwlist, &every, &fault, &fault_every)) return NULL;
    int kind;
    if (!fault[0] || !strcmp(fault, "none")) kind = TS_V_FAULT_NONE;
    else if (!strcmp(fault, "drop")) kind = TS_V_FAULT_DROP;
    else if (!strcmp(fault, "swap")) kind = TS_V_FAULT_SWAP;
    else return PyErr_Format(PyExc_ValueError, "unknown walker fault '%s' (expected drop or swap)", fault);
    if (fault_every < 1) return PyErr_Format(PyExc_ValueError, "fault_every must be >= 1");
    ts_v_sync_every = every;
    ts_v_fault_kind = kind;
    ts_v_fault_every = fault_every;
    Py_RETURN_NONE;
}

static PyObject *v_enable(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    atomic_store(&ts_v_on, on);
    Py_RETURN_NONE;
}

static PyObject *v_async_start(PyObject *self, PyObject *args) {
    (void)self;
    double rate_hz;
    unsigned long seed;
    int signo;
    if (!PyArg_ParseTuple(args, "dki", &rate_hz, &seed, &signo)) return NULL;
    if (ts_v_async_start(rate_hz, seed, signo) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *v_async_stop(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    ts_v_async_stop();
    Py_RETURN_NONE;
}

static PyObject *v_sync_check_now(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    ts_vshadow *sh = ts_v_current(NULL);
    if (!sh) return PyErr_NoMemory();
    ts_v_sync_check(sh, NULL);
    Py_RETURN_NONE;
}

static int put_u64(PyObject *d, const char *key, uint64_t v) {
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    int r = o ? PyDict_SetItemString(d, key, o) : -1;
    Py_XDECREF(o);
    return r;
}

/* Counters, examples captured so far, then release of any code objects no
 * longer needed for them. */
static PyObject *v_collect(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (int l = 0; l < TS_V_NLAYERS; l++) {
        PyObject *kinds = PyDict_New();
        if (!kinds) goto fail;
        for (int k = 0; k < TS_V_NKINDS; k++)
            if (put_u64(kinds, ts_v_kind_names[k], atomic_load(&ts_v_counts[l][k])) < 0) {
                Py_DECREF(kinds);
                goto fail;
            }
        PyObject *layer = Py_BuildValue("{s:K,s:N}", "checked", (unsigned long long)atomic_load(&ts_v_checked[l]),
                                        "kinds", kinds);
        if (!layer || PyDict_SetItemString(d, ts_v_layer_names[l], layer) < 0) {
            Py_XDECREF(layer);
            goto fail;
        }
        Py_DECREF(layer);
    }
    PyObject *reasons = PyDict_New();
    if (!reasons || PyDict_SetItemString(d, "partial_reasons", reasons) < 0) {
        Py_XDECREF(reasons);
        goto fail;
    }
    Py_DECREF(reasons);
    for (int r = 1; r < TS_NREASONS; r++)
        if (atomic_load(&ts_v_partial_reasons[r]) &&
            put_u64(reasons, ts_partial_names[r], atomic_load(&ts_v_partial_reasons[r])) < 0)
            goto fail;
    if (put_u64(d, "signals_sent", atomic_load(&ts_v_sig_sent)) < 0 ||
        put_u64(d, "signals_handled", atomic_load(&ts_v_sig_handled)) < 0 ||
        put_u64(d, "signals_busy", atomic_load(&ts_v_sig_busy)) < 0 ||
        put_u64(d, "signals_unregistered", atomic_load(&ts_v_sig_unregistered)) < 0 ||
        put_u64(d, "signals_esrch", atomic_load(&ts_v_sig_esrch)) < 0 ||
        put_u64(d, "shadow_resyncs", atomic_load(&ts_v_resyncs)) < 0 ||
        put_u64(d, "shadow_pop_mismatches", atomic_load(&ts_v_pop_mismatch)) < 0 ||
        put_u64(d, "silent_links", atomic_load(&ts_v_silent_links)) < 0 ||
        put_u64(d, "threads", atomic_load(&ts_v_threads_seen)) < 0 ||
        put_u64(d, "faults_injected", atomic_load(&ts_v_faults_applied)) < 0)
        goto fail;
    PyObject *ex = ts_v_sync_examples();
    PyObject *aex = ex ? ts_v_async_examples() : NULL;
    if (!aex) {
        Py_XDECREF(ex);
        goto fail;
    }
    int bad = PyList_SetSlice(ex, PyList_GET_SIZE(ex), PyList_GET_SIZE(ex), aex) < 0 ||
              PyDict_SetItemString(d, "examples", ex) < 0;
    Py_DECREF(ex);
    Py_DECREF(aex);
    if (bad) goto fail;
    PyObject *none = ts_v_collect_garbage();
    Py_XDECREF(none);
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

static PyMethodDef ts_v_methods[] = {
    {"validate_ev_start", (PyCFunction)(void (*)(void))v_ev_start, METH_FASTCALL, "sys.monitoring PY_START callback"},
    {"validate_ev_resume", (PyCFunction)(void (*)(void))v_ev_resume, METH_FASTCALL,
     "sys.monitoring PY_RESUME callback"},
    {"validate_ev_throw", (PyCFunction)(void (*)(void))v_ev_throw, METH_FASTCALL, "sys.monitoring PY_THROW callback"},
    {"validate_ev_exit", (PyCFunction)(void (*)(void))v_ev_exit, METH_FASTCALL,
     "sys.monitoring PY_RETURN/PY_YIELD/PY_UNWIND callback"},
    {"validate_install_profile", v_install_profile, METH_NOARGS,
     "3.10/3.11: install the oracle's C profile function on this thread"},
    {"validate_configure", (PyCFunction)(void (*)(void))v_configure, METH_VARARGS | METH_KEYWORDS,
     "validate_configure(sync_every=25, fault='', fault_every=20)"},
    {"validate_enable", v_enable, METH_O, "turn event handling and signal checks on or off"},
    {"validate_async_start", v_async_start, METH_VARARGS, "validate_async_start(rate_hz, seed, signo)"},
    {"validate_async_stop", v_async_stop, METH_NOARGS, "stop the signal-sending thread"},
    {"validate_sync_check_now", v_sync_check_now, METH_NOARGS, "run one synchronous check on this thread"},
    {"validate_collect", v_collect, METH_NOARGS, "counters and example stacks so far"},
    {NULL, NULL, 0, NULL},
};

int ts_validate_add_methods(PyObject *module) {
    if (PyObject_HasAttrString(module, "validate_collect")) return 0;
    return PyModule_AddFunctions(module, ts_v_methods);
}
