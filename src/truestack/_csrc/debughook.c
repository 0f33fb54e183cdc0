/* truestack._debughook: the debugger's breakpoint fast path.
 *
 * Three pieces, all keyed on one per-code-object record kept in the code
 * object's co_extra slot (so it dies with the code, and a freed code object's
 * address reused by a new one can never inherit a stale answer):
 *
 * - 3.10/3.11: a PEP 523 frame-evaluation hook. Each frame's code record says
 *   whether the code holds a breakpoint; only then is the thread's C trace
 *   function (trace_lines) switched on, for the duration of that frame.
 *   Frames of other code called from it get tracing switched off again while
 *   they run. No Python runs for code without breakpoints; what is left is
 *   the probe (an inline co_extra read) and, on 3.11 only, the interpreter's
 *   own price for any PEP 523 hook: Python-to-Python calls are no longer
 *   inlined into one C frame (about 1.7x on a call-bound fib, nothing on
 *   code that does work per call).
 * - 3.12+: monitor_line, registered as the sys.monitoring LINE callback, so
 *   a breakpoint line's event is handled without a Python-level call.
 * - Both: the breakpoint decision itself (enabled, hit and ignore counts,
 *   temporary, condition) in C. A condition of the form `name OP const` or
 *   `name % k OP const` on an exact int/float/str fast local is decided here;
 *   any other condition is evaluated from its compiled code against a
 *   small locals dict of just the fast locals it names (frame.f_locals only
 *   when it names a cell or the code has no fast locals).
 *
 * Records are filled lazily by a Python callback (classify) and go stale
 * when `invalidate()` bumps the generation (breakpoints added or removed).
 */
#include "debughook.h"

/* ------------------------------------------------ 3.10/3.11: eval hook */

static PyObject *probe_armed_cb; /* called once an entry probe installed the hook (3.11) */

#if TS_HAS_HOOK
static int watched_code(PyObject *code);
static void switch_trace(PyThreadState *ts, Py_tracefunc func);
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/* The frame the last entry probe started tracing (one is enough: another
 * thread's such frame is switched off at its next call instead). */
static struct _PyInterpreterFrame *probe_frame;
#endif

static int trace_lines(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
    (void)obj;
    (void)arg;
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    if (what == PyTrace_RETURN && frame->f_frame == probe_frame) {
        /* The frame an entry probe started ran before the hook existed, so
         * the hook will not switch tracing off when it returns: do it here
         * if its caller holds no breakpoint. */
        probe_frame = NULL;
        struct _PyInterpreterFrame *back = frame->f_frame->previous;
        if (!watched_code(back ? (PyObject *)back->f_code : NULL)) switch_trace(PyThreadState_Get(), NULL);
        return 0;
    }
#endif
    if (what != PyTrace_LINE) return 0;
    dh_n_line_events++;
    CodeRecord *rec;
    if (dh_lookup((PyObject *)dh_frame_code(frame), &rec) < 0) return -1;
    LineSites *ls = dh_sites_at(rec, frame->f_lineno); /* call_trace has just set f_lineno */
    if (ls == NULL) return 0;
    Where w;
    dh_where_from_frame(&w, frame);
    return dh_visit_line(rec, ls, &w);
}

/* Switch this thread's trace function, keeping a pending exception (the
 * frame's result may be NULL with one set). */
static void switch_trace(PyThreadState *ts, Py_tracefunc func) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (_PyEval_SetTrace(ts, func, NULL) < 0) PyErr_WriteUnraisable(NULL);
    PyErr_Restore(type, value, tb);
}

#if PY_VERSION_HEX >= 0x030B0000
typedef struct _PyInterpreterFrame EvalFrame;
#else
typedef PyFrameObject EvalFrame;
#endif

/* Does `code` hold a breakpoint? Keeps a pending exception (gen.throw()
 * evaluates its frame with one set; a frame's result may be NULL). */
static int watched_code(PyObject *code) {
    if (code == NULL) return 0;
    CodeRecord *fresh = dh_record_of(code);
    if (fresh != NULL && fresh->generation == dh_generation) return fresh->nlines > 0;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    CodeRecord *rec = NULL;
    if (dh_lookup(code, &rec) < 0) {
        PyErr_WriteUnraisable(code);
        rec = NULL;
    }
    PyErr_Restore(type, value, tb);
    return rec != NULL;
}

/* The code of the frame this one returns to: the thread's current frame
 * while the hook runs (the new frame is not linked in yet). */
static PyObject *caller_code(PyThreadState *ts) {
#if PY_VERSION_HEX >= 0x030B0000
    struct _PyInterpreterFrame *caller = ts->cframe->current_frame;
#else
    PyFrameObject *caller = ts->frame;
#endif
    return caller ? (PyObject *)caller->f_code : NULL;
}

static PyObject *eval_hook(PyThreadState *ts, EvalFrame *frame, int throwflag) {
    Py_tracefunc prev = ts->c_tracefunc;
    /* Inside a trace callback (the debugger's shell, the classifier), or
     * someone else traces this thread (stepping uses sys.settrace): stay out
     * of the way. */
    if (ts->tracing || (prev != NULL && prev != trace_lines)) return _PyEval_EvalFrameDefault(ts, frame, throwflag);
    /* The common case, inline: a current record says whether the code is watched. */
    CodeRecord *rec = dh_record_of((PyObject *)frame->f_code);
    int watched =
        rec != NULL && rec->generation == dh_generation ? rec->nlines > 0 : watched_code((PyObject *)frame->f_code);
    if (watched == (prev == trace_lines)) return _PyEval_EvalFrameDefault(ts, frame, throwflag);
    PyObject *caller = caller_code(ts); /* borrowed: the caller outlives this call */
    Py_tracefunc want = watched ? trace_lines : NULL;
    switch_trace(ts, want);
    PyObject *result = _PyEval_EvalFrameDefault(ts, frame, throwflag);
    /* Back in the caller: trace it if its code holds a breakpoint (now; the
     * debugger may have set one while this frame ran), unless the debugger
     * switched tracing itself meanwhile (stepping). */
    if (ts->c_tracefunc == want) {
        Py_tracefunc after = watched_code(caller) ? trace_lines : NULL;
        if (after != want) switch_trace(ts, after);
    }
    return result;
}
#endif

static Py_ssize_t dh_n_probe_installs; /* hooks installed by an entry probe */

/* 3.11's entry probe (debugger/entry_probe.py): code holding a breakpoint
 * calls this right after its RESUME. The hook is installed only now, the
 * first time such code runs, because on 3.11 an installed hook costs every
 * Python-to-Python call its inlining; the frame already running misses the
 * hook's entry, so its thread is line-traced here, as the hook would have. */
static PyObject *entered(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
#if TS_HAS_HOOK
    PyThreadState *ts = PyThreadState_Get();
    PyInterpreterState *interp = ts->interp;
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (current != _PyEval_EvalFrameDefault) {
        /* Already armed (probes left in running code, or a thread that
         * raced), or another tool's hook: the debugger then traces itself. */
        Py_RETURN_NONE;
    }
    _PyInterpreterState_SetEvalFrameFunc(interp, eval_hook);
    dh_n_probe_installs++;
    if (!ts->tracing && ts->c_tracefunc == NULL) {
        switch_trace(ts, trace_lines);
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
        probe_frame = ts->cframe->current_frame;
#endif
    }
    /* With the hook in place the probes only cost calls: the debugger takes them out. */
    if (probe_armed_cb != NULL) {
        PyObject *r = PyObject_CallNoArgs(probe_armed_cb);
        if (r == NULL) return NULL;
        Py_DECREF(r);
    }
#endif
    Py_RETURN_NONE;
}

static PyObject *on_probe_armed(PyObject *m, PyObject *cb) {
    (void)m;
    Py_XSETREF(probe_armed_cb, cb == Py_None ? NULL : Py_NewRef(cb));
    Py_RETURN_NONE;
}

/* ---------------------------------------------------- module functions */

static PyObject *configure(PyObject *m, PyObject *args, PyObject *kwds) {
    (void)m;
    static char *kwlist[] = {"classify", "stop", "report", "disable", NULL};
    PyObject *classify, *stop, *report, *disable = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O", kwlist, &classify, &stop, &report, &disable)) return NULL;
    Py_XSETREF(dh_classify_cb, classify == Py_None ? NULL : Py_NewRef(classify));
    Py_XSETREF(dh_stop_cb, stop == Py_None ? NULL : Py_NewRef(stop));
    Py_XSETREF(dh_report_cb, report == Py_None ? NULL : Py_NewRef(report));
    Py_XSETREF(dh_disable_obj, Py_NewRef(disable));
    dh_generation++;
    Py_RETURN_NONE;
}

static PyObject *invalidate(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    dh_generation++;
    Py_RETURN_NONE;
}

static PyObject *check(PyObject *m, PyObject *frame) {
    (void)m;
    if (!PyFrame_Check(frame)) {
        PyErr_SetString(PyExc_TypeError, "check() takes a frame");
        return NULL;
    }
    PyFrameObject *f = (PyFrameObject *)frame;
    CodeRecord *rec;
    if (dh_lookup((PyObject *)dh_frame_code(f), &rec) < 0) return NULL;
    LineSites *ls = dh_sites_at(rec, PyFrame_GetLineNumber(f));
    if (ls == NULL) Py_RETURN_NONE;
    Where w;
    dh_where_from_frame(&w, f);
    PyObject *hit;
    int delete_ok = 0;
    Py_ssize_t hit_no = 0;
    if (dh_decide(rec, ls, &w, &hit, &delete_ok, &hit_no) < 0) return NULL;
    if (hit == NULL) Py_RETURN_NONE;
    return Py_BuildValue("(NOn)", hit, delete_ok ? Py_True : Py_False, hit_no);
}

static PyObject *monitor_line(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    (void)m;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "monitor_line(code, line)");
        return NULL;
    }
    dh_n_line_events++;
    CodeRecord *rec;
    if (dh_lookup(args[0], &rec) < 0) return NULL;
    int line = PyLong_AsInt(args[1]);
    if (line == -1 && PyErr_Occurred()) return NULL;
    LineSites *ls = dh_sites_at(rec, line);
    if (ls == NULL) return Py_NewRef(dh_disable_obj ? dh_disable_obj : Py_None);
    Where w = {NULL, NULL, NULL};
#if PY_VERSION_HEX >= 0x030C0000
    PyThreadState *ts = PyThreadState_Get();
#if PY_VERSION_HEX >= 0x030D0000
    struct _PyInterpreterFrame *top = ts->current_frame;
    PyObject *running = top ? top->f_executable : NULL;
#else
    struct _PyInterpreterFrame *top = ts->cframe->current_frame;
    PyObject *running = top ? (PyObject *)top->f_code : NULL;
#endif
    if (running == args[0]) { /* a C callback pushes no frame: the line's frame is on top */
        w.localsplus = top->localsplus;
        w.globals = top->f_globals;
    }
#endif
    if (w.globals == NULL) {
        PyFrameObject *f = dh_where_frame(&w);
        if (f == NULL) return NULL;
        dh_where_from_frame(&w, f);
    }
    if (dh_visit_line(rec, ls, &w) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *install(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
#if TS_HAS_HOOK
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
    if (current != _PyEval_EvalFrameDefault && current != eval_hook) Py_RETURN_FALSE; /* another tool's hook */
    _PyInterpreterState_SetEvalFrameFunc(interp, eval_hook);
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE; /* 3.12+ uses sys.monitoring */
#endif
}

static PyObject *uninstall(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
#if TS_HAS_HOOK
    PyInterpreterState *interp = PyInterpreterState_Get();
    if (_PyInterpreterState_GetEvalFrameFunc(interp) == eval_hook)
        _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    probe_frame = NULL;
#endif
    /* Threads left with our trace function (their frame never returned) drop it. */
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t != NULL; t = PyThreadState_Next(t))
        if (t->c_tracefunc == trace_lines && _PyEval_SetTrace(t, NULL, NULL) < 0) return NULL;
#endif
    dh_generation++;
    Py_RETURN_NONE;
}

static PyObject *hook_installed(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
#if TS_HAS_HOOK
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == eval_hook);
#else
    Py_RETURN_FALSE;
#endif
}

/* Turn line tracing on for the given threads (ids) whose frames already
 * run code with breakpoints: the hook only sees frames when they start. */
static PyObject *trace_threads(PyObject *m, PyObject *ids) {
    (void)m;
#if TS_HAS_HOOK
    PyInterpreterState *interp = PyInterpreterState_Get();
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t != NULL; t = PyThreadState_Next(t)) {
        if (t->c_tracefunc != NULL) continue;
        PyObject *id = PyLong_FromUnsignedLong(t->thread_id);
        if (id == NULL) return NULL;
        int wanted = PySequence_Contains(ids, id);
        Py_DECREF(id);
        if (wanted < 0) return NULL;
        if (wanted && _PyEval_SetTrace(t, trace_lines, NULL) < 0) return NULL;
    }
#else
    (void)ids;
#endif
    Py_RETURN_NONE;
}

static PyObject *thread_traced(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
#if TS_HAS_HOOK
    return PyBool_FromLong(PyThreadState_Get()->c_tracefunc == trace_lines);
#else
    Py_RETURN_FALSE;
#endif
}

/* Put `new` at `index` of a code object's constants tuple, in place: a
 * nested def that has not run yet makes its function from this tuple, so
 * this is the only way its future functions get the probed code. Only a
 * code object may replace a code object. */
static PyObject *swap_const(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    (void)m;
    if (nargs != 3 || !PyTuple_Check(args[0]) || !PyLong_Check(args[1]) || !PyCode_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "swap_const(consts: tuple, index: int, new: code)");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || i >= PyTuple_GET_SIZE(args[0]) || !PyCode_Check(PyTuple_GET_ITEM(args[0], i))) {
        PyErr_SetString(PyExc_ValueError, "swap_const: no code object at that index");
        return NULL;
    }
    PyObject *old = PyTuple_GET_ITEM(args[0], i);
    PyTuple_SET_ITEM(args[0], i, Py_NewRef(args[2]));
    Py_DECREF(old);
    Py_RETURN_NONE;
}

static PyObject *counters(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return Py_BuildValue("{snsnsnsnsn}", "simple", dh_n_simple, "named_locals", dh_n_named_locals, "f_locals",
                         dh_n_f_locals, "line_events", dh_n_line_events, "probe_installs", dh_n_probe_installs);
}

static PyMethodDef methods[] = {
    {"counters", counters, METH_NOARGS,
     "How conditions were decided so far (simple: in C, named_locals, f_locals), and line events seen in C."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "configure(classify, stop, report, disable=None): the Python callbacks."},
    {"invalidate", invalidate, METH_NOARGS, "Breakpoints changed: every code record is asked again."},
    {"check", check, METH_O, "check(frame) -> (bp, delete_ok, hit_no) or None: dh_decide the frame's current line."},
    {"monitor_line", (PyCFunction)(void (*)(void))monitor_line, METH_FASTCALL, "sys.monitoring LINE callback (3.12+)."},
    {"install", install, METH_NOARGS,
     "Install the frame-evaluation hook (3.10/3.11); False where there is none or another tool has one."},
    {"uninstall", uninstall, METH_NOARGS, "Remove the hook and our trace function from every thread."},
    {"hook_installed", hook_installed, METH_NOARGS, "Is the frame-evaluation hook installed?"},
    {"trace_threads", trace_threads, METH_O, "Line-trace the threads with these ids (untraced ones only)."},
    {"thread_traced", thread_traced, METH_NOARGS, "Does this thread run our C trace function?"},
    {"entered", entered, METH_NOARGS, "3.11 entry probe: install the hook and line-trace this frame's thread."},
    {"on_probe_armed", on_probe_armed, METH_O,
     "on_probe_armed(callback or None): called after a probe installs the hook."},
    {"swap_const", (PyCFunction)(void (*)(void))swap_const, METH_FASTCALL,
     "swap_const(consts, index, code): replace a code constant in place (entry probes)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "truestack._debughook",
    .m_doc = "The debugger's breakpoint fast path (see debughook.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__debughook(void) {
    if (dh_extra_index < 0) {
        dh_extra_index = _PyEval_RequestCodeExtraIndex(dh_free_record);
        if (dh_extra_index < 0) {
            PyErr_SetString(PyExc_RuntimeError, "no free code-object extra slot");
            return NULL;
        }
    }
    if (PyType_Ready(&dh_BreakStateType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "BreakState", (PyObject *)&dh_BreakStateType) < 0 ||
        PyModule_AddIntConstant(m, "HAS_HOOK", TS_HAS_HOOK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
