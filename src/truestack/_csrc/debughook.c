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
#define PY_SSIZE_T_CLEAN
#include "Python.h"
#include "frameobject.h"
#include "structmember.h"
#include <stdint.h>
#include <string.h>
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif

#define TS_HAS_HOOK (PY_VERSION_HEX < 0x030C0000)

#if PY_VERSION_HEX < 0x030D0000
#define PyLong_AsInt _PyLong_AsInt /* public from 3.13 */
#endif

/* ------------------------------------------------------------------ state */

typedef struct {
    PyObject_HEAD char enabled;
    char temporary;
    Py_ssize_t hits;
    Py_ssize_t ignore;
    int op;             /* Py_LT..Py_GE for a simple condition, -1 otherwise */
    PyObject *constant; /* right-hand side of the simple condition */
    PyObject *modulus;  /* `name % modulus OP constant`, or NULL */
    PyObject *cond_code;
} BreakState;

typedef struct {
    BreakState *state;
    PyObject *bp;         /* the Python Breakpoint handed back on a stop */
    int slot;             /* fast-local slot of the simple condition's name, -1: none */
    PyObject *local_refs; /* tuple of (name, slot) for the condition's locals, or NULL: use f_locals */
} Candidate;

typedef struct {
    int line;
    Py_ssize_t count;
    Candidate *cands;
} LineSites;

typedef struct {
    uint64_t generation;
    int pins; /* >0 while a decision reads this record: refills wait */
    Py_ssize_t nlines;
    LineSites *lines;
} CodeRecord;

static Py_ssize_t extra_index = -1;
static uint64_t generation = 1;
static PyObject *classify_cb, *stop_cb, *report_cb, *disable_obj;
/* How conditions were decided, for tests and `counters()`: in C from a fast
 * local, by evaluating the code against the named locals, or against f_locals. */
static Py_ssize_t n_simple, n_named_locals, n_f_locals;
static Py_ssize_t n_line_events; /* line events that reached C (trace_lines, monitor_line) */

/* ----------------------------------------------------------- BreakState */

static void state_dealloc(BreakState *self) {
    Py_XDECREF(self->constant);
    Py_XDECREF(self->modulus);
    Py_XDECREF(self->cond_code);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int state_init(BreakState *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"cond_code", "op", "constant", "modulus", "temporary", NULL};
    PyObject *cond_code = Py_None, *constant = Py_None, *modulus = Py_None;
    int op = -1, temporary = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OiOOp", kwlist, &cond_code, &op, &constant, &modulus, &temporary))
        return -1;
    if (cond_code != Py_None && !PyCode_Check(cond_code)) {
        PyErr_SetString(PyExc_TypeError, "cond_code must be a code object or None");
        return -1;
    }
    if (op < -1 || op > Py_GE || (op >= 0 && (cond_code == Py_None || constant == Py_None))) {
        PyErr_SetString(PyExc_ValueError, "a simple condition needs an operator, a constant and its code");
        return -1;
    }
    self->enabled = 1;
    self->temporary = (char)temporary;
    self->op = op;
    Py_XSETREF(self->cond_code, cond_code == Py_None ? NULL : Py_NewRef(cond_code));
    Py_XSETREF(self->constant, constant == Py_None ? NULL : Py_NewRef(constant));
    Py_XSETREF(self->modulus, modulus == Py_None ? NULL : Py_NewRef(modulus));
    return 0;
}

static PyMemberDef state_members[] = {
    {"enabled", T_BOOL, offsetof(BreakState, enabled), 0, "stops only while enabled"},
    {"temporary", T_BOOL, offsetof(BreakState, temporary), 0, "deleted at its first stop"},
    {"hits", T_PYSSIZET, offsetof(BreakState, hits), 0, "times reached while enabled with the condition true"},
    {"ignore", T_PYSSIZET, offsetof(BreakState, ignore), 0, "stops still to skip"},
    {"op", T_INT, offsetof(BreakState, op), READONLY, "simple condition's comparison, -1 if none"},
    {"constant", T_OBJECT, offsetof(BreakState, constant), READONLY, NULL},
    {"modulus", T_OBJECT, offsetof(BreakState, modulus), READONLY, NULL},
    {"cond_code", T_OBJECT, offsetof(BreakState, cond_code), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BreakStateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "truestack._debughook.BreakState",
    .tp_basicsize = sizeof(BreakState),
    .tp_dealloc = (destructor)state_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Counts and condition of one breakpoint, read and updated by the C fast path.",
    .tp_members = state_members,
    .tp_init = (initproc)state_init,
    .tp_new = PyType_GenericNew,
};

/* ---------------------------------------------------------- code records */

static void clear_lines(CodeRecord *rec) {
    for (Py_ssize_t i = 0; i < rec->nlines; i++) {
        LineSites *ls = &rec->lines[i];
        for (Py_ssize_t j = 0; j < ls->count; j++) {
            Py_XDECREF(ls->cands[j].state);
            Py_XDECREF(ls->cands[j].bp);
            Py_XDECREF(ls->cands[j].local_refs);
        }
        PyMem_Free(ls->cands);
    }
    PyMem_Free(rec->lines);
    rec->lines = NULL;
    rec->nlines = 0;
}

static void free_record(void *p) {
    CodeRecord *rec = (CodeRecord *)p;
    clear_lines(rec);
    PyMem_Free(rec);
}

/* One candidate from classify's (state, bp, slot, local_refs) tuple. */
static int fill_candidate(Candidate *c, PyObject *item) {
    PyObject *state, *bp, *refs;
    int slot;
    if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "O!OiO", &BreakStateType, &state, &bp, &slot, &refs)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "classify: candidates are (state, bp, slot, refs)");
        return -1;
    }
    if (refs != Py_None && !PyTuple_Check(refs)) {
        PyErr_SetString(PyExc_TypeError, "classify: refs must be a tuple or None");
        return -1;
    }
    c->state = (BreakState *)Py_NewRef(state);
    c->bp = Py_NewRef(bp);
    c->slot = slot;
    c->local_refs = refs == Py_None ? NULL : Py_NewRef(refs);
    return 0;
}

/* Rebuild `rec` from classify's answer: None or {line: [candidate, ...]}. */
static int fill_record(CodeRecord *rec, PyObject *answer) {
    clear_lines(rec);
    if (answer == Py_None) return 0;
    if (!PyDict_Check(answer)) {
        PyErr_SetString(PyExc_TypeError, "classify must return a dict or None");
        return -1;
    }
    Py_ssize_t n = PyDict_Size(answer);
    if (n == 0) return 0;
    rec->lines = PyMem_Calloc((size_t)n, sizeof(LineSites));
    if (rec->lines == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(answer, &pos, &key, &value)) {
        LineSites *ls = &rec->lines[i];
        rec->nlines = ++i; /* counted before filling, so a failure frees what was filled */
        ls->line = PyLong_AsInt(key);
        if (ls->line == -1 && PyErr_Occurred()) return -1;
        PyObject *seq = PySequence_Fast(value, "classify: a line maps to a sequence");
        if (seq == NULL) return -1;
        Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
        ls->cands = PyMem_Calloc(count ? (size_t)count : 1, sizeof(Candidate));
        if (ls->cands == NULL) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            return -1;
        }
        for (Py_ssize_t j = 0; j < count; j++) {
            if (fill_candidate(&ls->cands[j], PySequence_Fast_GET_ITEM(seq, j)) < 0) {
                Py_DECREF(seq);
                return -1;
            }
            ls->count = j + 1;
        }
        Py_DECREF(seq);
    }
    return 0;
}

/* co_extra's layout (Objects/codeobject.c, the same 3.6-3.13), read here
 * directly: the hook probes it on every call, and _PyCode_GetExtra is a
 * function call with checks. lookup() verifies it on the first record it
 * stores and falls back to the API if it ever disagrees. */
typedef struct {
    Py_ssize_t ce_size;
    void *ce_extras[1];
} CodeExtraMirror;
static int mirror_ok = 1;

static inline CodeRecord *record_of(PyObject *code) {
    if (!mirror_ok) return NULL;
    CodeExtraMirror *extra = (CodeExtraMirror *)((PyCodeObject *)code)->co_extra;
    return extra != NULL && extra_index < extra->ce_size ? (CodeRecord *)extra->ce_extras[extra_index] : NULL;
}

/* The current record of `code`: *out is NULL when the code holds no
 * breakpoint. Returns -1 with an exception set on failure. */
static int lookup(PyObject *code, CodeRecord **out) {
    *out = NULL;
    CodeRecord *rec = record_of(code);
    if (rec == NULL && !mirror_ok) {
        void *extra = NULL;
        if (_PyCode_GetExtra(code, extra_index, &extra) < 0) return -1;
        rec = (CodeRecord *)extra;
    }
    if (rec != NULL && (rec->generation == generation || rec->pins > 0)) {
        *out = rec->nlines ? rec : NULL;
        return 0;
    }
    if (classify_cb == NULL) return 0;
    if (rec == NULL) {
        rec = PyMem_Calloc(1, sizeof(CodeRecord));
        if (rec == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (_PyCode_SetExtra(code, extra_index, rec) < 0) {
            PyMem_Free(rec);
            return -1;
        }
        if (record_of(code) != rec) mirror_ok = 0; /* the layout differs: use the API from now on */
    }
    uint64_t asked_at = generation;
    /* The classifier's own frames are neither probed by the hook nor
     * reported by sys.monitoring: to CPython this is a trace callback. */
    PyThreadState *ts = PyThreadState_Get();
    ts->tracing++;
    PyObject *answer = PyObject_CallOneArg(classify_cb, code);
    ts->tracing--;
    if (answer == NULL) return -1;
    int rc = fill_record(rec, answer);
    Py_DECREF(answer);
    if (rc < 0) {
        clear_lines(rec);
        return -1;
    }
    rec->generation = asked_at; /* a change during classify leaves it stale: asked again next time */
    *out = rec->nlines ? rec : NULL;
    return 0;
}

static LineSites *sites_at(CodeRecord *rec, int line) {
    if (rec == NULL) return NULL;
    for (Py_ssize_t i = 0; i < rec->nlines; i++)
        if (rec->lines[i].line == line) return &rec->lines[i];
    return NULL;
}

/* -------------------------------------------------------- frame access */

/* Where a line event happened. `frame` may be NULL until Python needs it
 * (3.12+: only the interpreter frame is at hand in the LINE callback). */
typedef struct {
    PyFrameObject *frame;  /* borrowed */
    PyObject **localsplus; /* NULL: slots unknown, read none */
    PyObject *globals;     /* borrowed */
} Where;

static PyCodeObject *frame_code(PyFrameObject *f) {
#if PY_VERSION_HEX >= 0x030D0000
    return (PyCodeObject *)f->f_frame->f_executable;
#elif PY_VERSION_HEX >= 0x030B0000
    return f->f_frame->f_code;
#else
    return f->f_code;
#endif
}

static void where_from_frame(Where *w, PyFrameObject *f) {
    w->frame = f;
#if PY_VERSION_HEX >= 0x030B0000
    w->localsplus = f->f_frame->localsplus;
    w->globals = f->f_frame->f_globals;
#else
    w->localsplus = f->f_localsplus;
    w->globals = f->f_globals;
#endif
}

static PyFrameObject *where_frame(Where *w) {
    if (w->frame == NULL) {
        w->frame = PyEval_GetFrame();
        if (w->frame == NULL && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "no Python frame");
    }
    return w->frame;
}

/* ----------------------------------------------------------- conditions */

/* `value OP constant` (or `value % modulus OP constant`) decided in C:
 * 1 true, 0 false, -1 "not for C" (Python evaluates it). Only exact int,
 * float and str values: comparing them runs no user code, so the answer is
 * the one eval would give. */
static int simple_holds(BreakState *st, PyObject *value) {
    int numeric = PyLong_CheckExact(value) || PyFloat_CheckExact(value);
    if (!numeric && !PyUnicode_CheckExact(value)) return -1;
    PyObject *lhs = value, *owned = NULL;
    if (st->modulus != NULL) {
        if (!numeric) return -1; /* str % is formatting */
        lhs = owned = PyNumber_Remainder(value, st->modulus);
        if (lhs == NULL) {
            PyErr_Clear();
            return -1;
        }
    }
    /* RichCompare, not RichCompareBool: its identity shortcut would call nan == nan true */
    PyObject *res = PyObject_RichCompare(lhs, st->constant, st->op);
    Py_XDECREF(owned);
    if (res == NULL) {
        PyErr_Clear();
        return -1;
    }
    int truth = PyObject_IsTrue(res);
    Py_DECREF(res);
    if (truth < 0) {
        PyErr_Clear();
        return -1;
    }
    return truth;
}

static PyObject *take_exception(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value != NULL && tb != NULL) PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
#endif
}

/* The locals the condition is evaluated with: the named fast locals only,
 * or the frame's whole f_locals when that was asked for. New reference. */
static PyObject *condition_locals(Candidate *c, Where *w) {
    if (c->local_refs == NULL || w->localsplus == NULL) {
        n_f_locals++;
        PyFrameObject *f = where_frame(w);
        return f ? PyObject_GetAttrString((PyObject *)f, "f_locals") : NULL;
    }
    n_named_locals++;
    PyObject *locals = PyDict_New();
    if (locals == NULL) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(c->local_refs);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ref = PyTuple_GET_ITEM(c->local_refs, i);
        if (!PyTuple_Check(ref) || PyTuple_GET_SIZE(ref) != 2) continue;
        int slot = PyLong_AsInt(PyTuple_GET_ITEM(ref, 1));
        if (slot < 0) {
            PyErr_Clear();
            continue;
        }
        PyObject *value = w->localsplus[slot];
        if (value != NULL && PyDict_SetItem(locals, PyTuple_GET_ITEM(ref, 0), value) < 0) {
            Py_DECREF(locals);
            return NULL;
        }
    }
    return locals;
}

enum { COND_FALSE = 0, COND_TRUE = 1, COND_RAISED = 2 };

/* COND_FALSE/TRUE, COND_RAISED (reported; pdb stops then), or -1 on a
 * failure of our own (the reporter failed, or no frame). */
static int condition_value(Candidate *c, Where *w) {
    BreakState *st = c->state;
    if (st->op >= 0 && c->slot >= 0 && w->localsplus != NULL) {
        PyObject *value = w->localsplus[c->slot];
        if (value != NULL) {
            int r = simple_holds(st, value);
            if (r >= 0) {
                n_simple++;
                return r;
            }
        }
    }
    int truth = -1;
    PyObject *locals = condition_locals(c, w);
    if (locals != NULL) {
        PyObject *res = PyEval_EvalCode(st->cond_code, w->globals, locals);
        Py_DECREF(locals);
        if (res != NULL) {
            truth = PyObject_IsTrue(res);
            Py_DECREF(res);
        }
    }
    if (truth >= 0) return truth;
    PyObject *exc = take_exception();
    if (report_cb != NULL) {
        PyObject *r = PyObject_CallFunctionObjArgs(report_cb, c->bp, exc ? exc : Py_None, NULL);
        Py_XDECREF(exc);
        if (r == NULL) return -1;
        Py_DECREF(r);
    } else {
        Py_XDECREF(exc);
    }
    return COND_RAISED;
}

/* pdb's bdb.effective(), but a hit is counted only when the condition
 * holds (or raised), as truestack always has: the first candidate that
 * stops, or none.
 * *hit gets a new reference to its Breakpoint; *delete_ok says whether a
 * temporary breakpoint may go (not after a condition raised). */
static int decide(CodeRecord *rec, LineSites *ls, Where *w, PyObject **hit, int *delete_ok) {
    *hit = NULL;
    rec->pins++;
    int rc = 0;
    for (Py_ssize_t i = 0; i < ls->count && *hit == NULL; i++) {
        Candidate *c = &ls->cands[i];
        BreakState *st = c->state;
        if (!st->enabled) continue;
        int verdict = COND_TRUE;
        if (st->cond_code != NULL) {
            verdict = condition_value(c, w);
            if (verdict < 0) {
                rc = -1;
                break;
            }
        }
        if (verdict == COND_FALSE) continue;
        st->hits++;
        if (verdict == COND_TRUE && st->ignore > 0) {
            st->ignore--;
            continue;
        }
        *hit = Py_NewRef(c->bp);
        *delete_ok = verdict == COND_TRUE;
    }
    rec->pins--;
    return rc;
}

/* Decide, and stop (the Python callback) if a breakpoint says so. */
static int visit_line(CodeRecord *rec, LineSites *ls, Where *w) {
    PyObject *hit;
    int delete_ok = 0;
    if (decide(rec, ls, w, &hit, &delete_ok) < 0) return -1;
    if (hit == NULL) return 0;
    PyFrameObject *frame = where_frame(w);
    PyObject *r = NULL;
    if (frame != NULL && stop_cb != NULL)
        r = PyObject_CallFunctionObjArgs(stop_cb, (PyObject *)frame, hit, delete_ok ? Py_True : Py_False, NULL);
    else if (frame != NULL)
        r = Py_NewRef(Py_None);
    Py_DECREF(hit);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* ------------------------------------------------ 3.10/3.11: eval hook */

#if TS_HAS_HOOK
static int trace_lines(PyObject *obj, PyFrameObject *frame, int what, PyObject *arg) {
    (void)obj;
    (void)arg;
    if (what != PyTrace_LINE) return 0;
    n_line_events++;
    CodeRecord *rec;
    if (lookup((PyObject *)frame_code(frame), &rec) < 0) return -1;
    LineSites *ls = sites_at(rec, frame->f_lineno); /* call_trace has just set f_lineno */
    if (ls == NULL) return 0;
    Where w;
    where_from_frame(&w, frame);
    return visit_line(rec, ls, &w);
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
    CodeRecord *fresh = record_of(code);
    if (fresh != NULL && fresh->generation == generation) return fresh->nlines > 0;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    CodeRecord *rec = NULL;
    if (lookup(code, &rec) < 0) {
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
    CodeRecord *rec = record_of((PyObject *)frame->f_code);
    int watched =
        rec != NULL && rec->generation == generation ? rec->nlines > 0 : watched_code((PyObject *)frame->f_code);
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

/* ---------------------------------------------------- module functions */

static PyObject *configure(PyObject *m, PyObject *args, PyObject *kwds) {
    (void)m;
    static char *kwlist[] = {"classify", "stop", "report", "disable", NULL};
    PyObject *classify, *stop, *report, *disable = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO|O", kwlist, &classify, &stop, &report, &disable)) return NULL;
    Py_XSETREF(classify_cb, classify == Py_None ? NULL : Py_NewRef(classify));
    Py_XSETREF(stop_cb, stop == Py_None ? NULL : Py_NewRef(stop));
    Py_XSETREF(report_cb, report == Py_None ? NULL : Py_NewRef(report));
    Py_XSETREF(disable_obj, Py_NewRef(disable));
    generation++;
    Py_RETURN_NONE;
}

static PyObject *invalidate(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    generation++;
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
    if (lookup((PyObject *)frame_code(f), &rec) < 0) return NULL;
    LineSites *ls = sites_at(rec, PyFrame_GetLineNumber(f));
    if (ls == NULL) Py_RETURN_NONE;
    Where w;
    where_from_frame(&w, f);
    PyObject *hit;
    int delete_ok = 0;
    if (decide(rec, ls, &w, &hit, &delete_ok) < 0) return NULL;
    if (hit == NULL) Py_RETURN_NONE;
    return Py_BuildValue("(NO)", hit, delete_ok ? Py_True : Py_False);
}

static PyObject *monitor_line(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    (void)m;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "monitor_line(code, line)");
        return NULL;
    }
    n_line_events++;
    CodeRecord *rec;
    if (lookup(args[0], &rec) < 0) return NULL;
    int line = PyLong_AsInt(args[1]);
    if (line == -1 && PyErr_Occurred()) return NULL;
    LineSites *ls = sites_at(rec, line);
    if (ls == NULL) return Py_NewRef(disable_obj ? disable_obj : Py_None);
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
        PyFrameObject *f = where_frame(&w);
        if (f == NULL) return NULL;
        where_from_frame(&w, f);
    }
    if (visit_line(rec, ls, &w) < 0) return NULL;
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
    /* Threads left with our trace function (their frame never returned) drop it. */
    for (PyThreadState *t = PyInterpreterState_ThreadHead(interp); t != NULL; t = PyThreadState_Next(t))
        if (t->c_tracefunc == trace_lines && _PyEval_SetTrace(t, NULL, NULL) < 0) return NULL;
#endif
    generation++;
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

static PyObject *counters(PyObject *m, PyObject *unused) {
    (void)m;
    (void)unused;
    return Py_BuildValue("{snsnsnsn}", "simple", n_simple, "named_locals", n_named_locals, "f_locals", n_f_locals,
                         "line_events", n_line_events);
}

static PyMethodDef methods[] = {
    {"counters", counters, METH_NOARGS,
     "How conditions were decided so far (simple: in C, named_locals, f_locals), and line events seen in C."},
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "configure(classify, stop, report, disable=None): the Python callbacks."},
    {"invalidate", invalidate, METH_NOARGS, "Breakpoints changed: every code record is asked again."},
    {"check", check, METH_O, "check(frame) -> (bp, delete_ok) or None: decide the frame's current line."},
    {"monitor_line", (PyCFunction)(void (*)(void))monitor_line, METH_FASTCALL, "sys.monitoring LINE callback (3.12+)."},
    {"install", install, METH_NOARGS,
     "Install the frame-evaluation hook (3.10/3.11); False where there is none or another tool has one."},
    {"uninstall", uninstall, METH_NOARGS, "Remove the hook and our trace function from every thread."},
    {"hook_installed", hook_installed, METH_NOARGS, "Is the frame-evaluation hook installed?"},
    {"trace_threads", trace_threads, METH_O, "Line-trace the threads with these ids (untraced ones only)."},
    {"thread_traced", thread_traced, METH_NOARGS, "Does this thread run our C trace function?"},
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
    if (extra_index < 0) {
        extra_index = _PyEval_RequestCodeExtraIndex(free_record);
        if (extra_index < 0) {
            PyErr_SetString(PyExc_RuntimeError, "no free code-object extra slot");
            return NULL;
        }
    }
    if (PyType_Ready(&BreakStateType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "BreakState", (PyObject *)&BreakStateType) < 0 ||
        PyModule_AddIntConstant(m, "HAS_HOOK", TS_HAS_HOOK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
