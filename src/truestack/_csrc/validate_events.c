/* Where the oracle hears of frames entering and leaving: sys.monitoring
 * callbacks on 3.12+, a C profile function on 3.10/3.11. Each event updates
 * the thread's shadow stack (validate_shadow.c) and every Nth function entry
 * runs the synchronous check (validate_sync.c); neither of those two knows
 * about the other, this file is where they meet. */
#include "validate_state.h"

/* sys.monitoring PY_START(code, offset): push, and every Nth entry run the
 * synchronous check. */
PyObject *ts_v_ev_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
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
PyObject *ts_v_ev_resume(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs >= 1 && atomic_load_explicit(&ts_v_on, memory_order_relaxed)) ts_v_push(args[0]);
    Py_RETURN_NONE;
}

/* PY_THROW(code, offset, exc): back on the stack, possibly under
 * delegating frames linked without events. */
PyObject *ts_v_ev_throw(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs >= 1 && atomic_load_explicit(&ts_v_on, memory_order_relaxed)) ts_v_push_checked(args[0], NULL);
    Py_RETURN_NONE;
}

/* PY_RETURN, PY_YIELD, PY_UNWIND (code, offset, value): the frame leaves. */
PyObject *ts_v_ev_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs >= 1 && atomic_load_explicit(&ts_v_on, memory_order_relaxed)) ts_v_pop(args[0], NULL);
    Py_RETURN_NONE;
}

#if PY_VERSION_HEX < 0x030C0000
/* 3.10/3.11: the C profile function of every validated thread. */
static int profile_func(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
    (void)obj, (void)arg;
    if (!atomic_load_explicit(&ts_v_on, memory_order_relaxed)) return 0;
    if (what != PyTrace_CALL && what != PyTrace_RETURN) return 0;
    PyCodeObject *code = PyFrame_GetCode(frame);
    Py_DECREF(code); /* borrowed from the frame from here on */
    ts_vshadow *sh = ts_v_tls;
    if (!sh) {
        /* Seeding includes this frame: nothing more for a call. */
        sh = ts_v_current(frame);
        if (!sh || what == PyTrace_CALL) return 0;
    } else if (what == PyTrace_CALL) {
        /* Generator frames may sit on callers linked without events (see
         * ts_v_push_checked): check the caller when it is cheap to. */
        int checked = 0;
        if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
            PyFrameObject *back = PyFrame_GetBack(frame);
            void *caller = NULL;
            if (back) {
                PyCodeObject *bc = PyFrame_GetCode(back);
                caller = bc;
                Py_DECREF(bc);
                Py_DECREF(back);
            }
            if (caller != (sh->depth ? sh->codes[sh->depth - 1] : NULL)) {
                if (ts_v_push_checked((PyObject *)code, frame) < 0) return 0;
                checked = 1;
            }
        }
        if (!checked && ts_v_push((PyObject *)code) < 0) return 0;
    }
    if (what == PyTrace_RETURN) {
        ts_v_pop((PyObject *)code, frame);
        return 0;
    }
    if (ts_v_sync_every > 0 && ++sh->starts % (unsigned long)ts_v_sync_every == 0) ts_v_sync_check(sh, frame);
    return 0;
}

/* Installs the C profile function on the calling thread (replacing the
 * Python bootstrap hook threading.setprofile put there). */
static int install_profile(void) {
    PyEval_SetProfile(profile_func, NULL);
    return 0;
}
#else
static int install_profile(void) {
    PyErr_SetString(PyExc_RuntimeError, "use sys.monitoring on Python 3.12+");
    return -1;
}
#endif

PyObject *ts_v_ev_install_profile(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    if (install_profile() < 0) return NULL;
    Py_RETURN_NONE;
}
