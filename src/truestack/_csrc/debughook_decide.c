/* truestack._debughook: frame access, conditions and the breakpoint decision.
 *
 * A condition of the form `name OP const` or `name % k OP const` on an exact
 * int/float/str fast local is decided here without Python; any other is
 * evaluated from its compiled code against a small dict of just the fast
 * locals it names (frame.f_locals only when it names a cell or the code has
 * no fast locals).
 */
#include "debughook.h"

/* -------------------------------------------------------- frame access */

PyCodeObject *dh_frame_code(PyFrameObject *f) {
#if PY_VERSION_HEX >= 0x030D0000
    return (PyCodeObject *)f->f_frame->f_executable;
#elif PY_VERSION_HEX >= 0x030B0000
    return f->f_frame->f_code;
#else
    return f->f_code;
#endif
}

void dh_where_from_frame(Where *w, PyFrameObject *f) {
    w->frame = f;
#if PY_VERSION_HEX >= 0x030B0000
    w->localsplus = f->f_frame->localsplus;
    w->globals = f->f_frame->f_globals;
#else
    w->localsplus = f->f_localsplus;
    w->globals = f->f_globals;
#endif
}

PyFrameObject *dh_where_frame(Where *w) {
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
        dh_n_f_locals++;
        PyFrameObject *f = dh_where_frame(w);
        return f ? PyObject_GetAttrString((PyObject *)f, "f_locals") : NULL;
    }
    dh_n_named_locals++;
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
                dh_n_simple++;
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
    if (dh_report_cb != NULL) {
        PyObject *r = PyObject_CallFunctionObjArgs(dh_report_cb, c->bp, exc ? exc : Py_None, NULL);
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
 * temporary breakpoint may go (not after a condition raised); *hit_no is
 * this stop's own hit count, taken now: another thread may count the next
 * hit before this one reaches the shell. */
int dh_decide(CodeRecord *rec, LineSites *ls, Where *w, PyObject **hit, int *delete_ok, Py_ssize_t *hit_no) {
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
        *hit_no = st->hits;
    }
    rec->pins--;
    return rc;
}

/* Decide, and stop (the Python callback) if a breakpoint says so. */
int dh_visit_line(CodeRecord *rec, LineSites *ls, Where *w) {
    PyObject *hit;
    int delete_ok = 0;
    Py_ssize_t hit_no = 0;
    if (dh_decide(rec, ls, w, &hit, &delete_ok, &hit_no) < 0) return -1;
    if (hit == NULL) return 0;
    PyFrameObject *frame = dh_where_frame(w);
    PyObject *r = NULL;
    if (frame != NULL && dh_stop_cb != NULL) {
        PyObject *no = PyLong_FromSsize_t(hit_no);
        if (no != NULL)
            r = PyObject_CallFunctionObjArgs(dh_stop_cb, (PyObject *)frame, hit, delete_ok ? Py_True : Py_False, no,
                                             NULL);
        Py_XDECREF(no);
    } else if (frame != NULL)
        r = Py_NewRef(Py_None);
    Py_DECREF(hit);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}
