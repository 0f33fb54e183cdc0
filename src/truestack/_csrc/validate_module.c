/* truestack._oracle: the validation oracle's Python entry points. It is a
 * separate extension from the sampler (truestack._native) and borrows the
 * sampler's walker through the core API capsule (core_api.h), so it checks
 * exactly the code that samples. The driver is truestack/validate/oracle.py. */
#include "validate_state.h"
#include <string.h>

const ts_core_api *ts_core;

static PyObject *v_configure(PyObject *self, PyObject *args, PyObject *kw) {
    (void)self;
    static char *kwlist[] = {"sync_every", NULL};
    int every = 25;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|i", kwlist, &every)) return NULL;
    if (every < 0) return PyErr_Format(PyExc_ValueError, "sync_every must be >= 0");
    ts_v_sync_every = every;
    Py_RETURN_NONE;
}

#ifdef TS_TEST_HOOKS
static PyObject *v_inject_walker_fault(PyObject *self, PyObject *args) {
    (void)self;
    const char *fault;
    int every;
    if (!PyArg_ParseTuple(args, "si", &fault, &every)) return NULL;
    int kind;
    if (!fault[0] || !strcmp(fault, "none"))
        kind = TS_V_FAULT_NONE;
    else if (!strcmp(fault, "drop"))
        kind = TS_V_FAULT_DROP;
    else if (!strcmp(fault, "swap"))
        kind = TS_V_FAULT_SWAP;
    else
        return PyErr_Format(PyExc_ValueError, "unknown walker fault '%s' (expected drop or swap)", fault);
    if (every < 1) return PyErr_Format(PyExc_ValueError, "fault_every must be >= 1");
    ts_v_fault_kind = kind;
    ts_v_fault_every = every;
    Py_RETURN_NONE;
}

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
/* The walk of this thread as a signal finds it inside the eval loop's entry (walker.c): tstate->cframe
 * already points at the new cframe, whose fields still hold old stack contents: `previous` 0, or a
 * stale cframe whose current_frame is 0 (stale=True); current_frame 0. -> (frames, reason). */
static PyObject *v_walk_entry_window(PyObject *self, PyObject *arg) {
    (void)self;
    int stale = PyObject_IsTrue(arg);
    if (stale < 0) return NULL;
    if (ts_core->safeload_install() != 0) return PyErr_SetFromErrno(PyExc_OSError);
    PyThreadState *ts = PyThreadState_Get();
    _PyCFrame old, window;
    memset(&old, 0, sizeof old);
    memset(&window, 0, sizeof window);
    window.previous = stale ? &old : NULL;
    ts_rawframe frames[8];
    ts_walk_result res = {0, 0, 0, NULL, 0};
    _PyCFrame *saved = ts->cframe;
    ts->cframe = &window;
    ts_core->walk(ts, frames, 8, &res);
    ts->cframe = saved;
    return Py_BuildValue("(is)", res.nframes, res.partial ? ts_core->partial_names[res.partial] : "ok");
}
#endif
#endif

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
    /* The program may have replaced our fault handler (faulthandler): put it back. */
    if (ts_core->safeload_install() != 0) return PyErr_SetFromErrno(PyExc_OSError);
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
        PyObject *layer =
            Py_BuildValue("{s:K,s:N}", "checked", (unsigned long long)atomic_load(&ts_v_checked[l]), "kinds", kinds);
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
            put_u64(reasons, ts_core->partial_names[r], atomic_load(&ts_v_partial_reasons[r])) < 0)
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

static PyMethodDef methods[] = {
    {"ev_start", (PyCFunction)(void (*)(void))ts_v_ev_start, METH_FASTCALL, "sys.monitoring PY_START callback"},
    {"ev_resume", (PyCFunction)(void (*)(void))ts_v_ev_resume, METH_FASTCALL, "sys.monitoring PY_RESUME callback"},
    {"ev_throw", (PyCFunction)(void (*)(void))ts_v_ev_throw, METH_FASTCALL, "sys.monitoring PY_THROW callback"},
    {"ev_exit", (PyCFunction)(void (*)(void))ts_v_ev_exit, METH_FASTCALL,
     "sys.monitoring PY_RETURN/PY_YIELD/PY_UNWIND callback"},
    {"install_profile", ts_v_ev_install_profile, METH_NOARGS,
     "3.10/3.11: install the oracle's C profile function on this thread"},
    {"configure", (PyCFunction)(void (*)(void))v_configure, METH_VARARGS | METH_KEYWORDS, "configure(sync_every=25)"},
#ifdef TS_TEST_HOOKS
    {"inject_walker_fault", v_inject_walker_fault, METH_VARARGS,
     "inject_walker_fault(kind, every): damage every Nth walk ('drop' or 'swap'; test builds only)"},
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
    {"walk_entry_window", v_walk_entry_window, METH_O,
     "walk_entry_window(stale): this thread walked as inside the eval loop's entry -> (frames, reason); "
     "3.11/3.12 test builds only"},
#endif
#endif
    {"enable", v_enable, METH_O, "turn event handling and signal checks on or off"},
    {"async_start", v_async_start, METH_VARARGS, "async_start(rate_hz, seed, signo)"},
    {"async_stop", v_async_stop, METH_NOARGS, "stop the signal-sending thread"},
    {"sync_check_now", v_sync_check_now, METH_NOARGS, "run one synchronous check on this thread"},
    {"collect", v_collect, METH_NOARGS, "counters and example stacks so far"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, .m_name = "truestack._oracle",
                                    .m_doc = "The validation oracle: checks truestack._native's walker.", .m_size = -1,
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit__oracle(void) {
    /* PyCapsule_Import imports only the package, then looks attributes up. */
    PyObject *native = PyImport_ImportModule("truestack._native");
    if (!native) return NULL;
    Py_DECREF(native);
    const ts_core_api *api = (const ts_core_api *)PyCapsule_Import(TS_CORE_API_CAPSULE, 0);
    if (!api) return NULL;
    if (api->version != TS_CORE_API_VERSION)
        return PyErr_Format(PyExc_ImportError, "truestack._native core API version %d, the oracle needs %d",
                            api->version, TS_CORE_API_VERSION);
    ts_core = api;
    return PyModule_Create(&moddef);
}
