/* truestack._debughook: BreakState and the per-code-object records.
 *
 * A code object's record lives in its co_extra slot, so it dies with the
 * code, and a freed code object's address reused by a new one can never
 * inherit a stale answer. Records are filled lazily by the Python classify
 * callback and go stale when the generation moves (breakpoints changed).
 */
#include "debughook.h"
#include "structmember.h"
#include <string.h>

Py_ssize_t dh_extra_index = -1;
uint64_t dh_generation = 1;
PyObject *dh_classify_cb, *dh_stop_cb, *dh_report_cb, *dh_disable_obj;
Py_ssize_t dh_n_simple, dh_n_named_locals, dh_n_f_locals;
Py_ssize_t dh_n_line_events; /* line events that reached C (trace_lines, monitor_line) */

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

PyTypeObject dh_BreakStateType = {
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

static void dh_clear_lines(CodeRecord *rec) {
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

void dh_free_record(void *p) {
    CodeRecord *rec = (CodeRecord *)p;
    dh_clear_lines(rec);
    PyMem_Free(rec);
}

/* One candidate from classify's (state, bp, slot, local_refs) tuple. */
static int fill_candidate(Candidate *c, PyObject *item) {
    PyObject *state, *bp, *refs;
    int slot;
    if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "O!OiO", &dh_BreakStateType, &state, &bp, &slot, &refs)) {
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
    dh_clear_lines(rec);
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

int dh_mirror_ok = 1;

int dh_lookup(PyObject *code, CodeRecord **out) {
    *out = NULL;
    CodeRecord *rec = dh_record_of(code);
    if (rec == NULL && !dh_mirror_ok) {
        void *extra = NULL;
        if (_PyCode_GetExtra(code, dh_extra_index, &extra) < 0) return -1;
        rec = (CodeRecord *)extra;
    }
    if (rec != NULL && (rec->generation == dh_generation || rec->pins > 0)) {
        *out = rec->nlines ? rec : NULL;
        return 0;
    }
    if (dh_classify_cb == NULL) return 0;
    if (rec == NULL) {
        rec = PyMem_Calloc(1, sizeof(CodeRecord));
        if (rec == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (_PyCode_SetExtra(code, dh_extra_index, rec) < 0) {
            PyMem_Free(rec);
            return -1;
        }
        if (dh_record_of(code) != rec) dh_mirror_ok = 0; /* the layout differs: use the API from now on */
    }
    uint64_t asked_at = dh_generation;
    /* The classifier's own frames are neither probed by the hook nor
     * reported by sys.monitoring: to CPython this is a trace callback. */
    PyThreadState *ts = PyThreadState_Get();
    ts->tracing++;
    PyObject *answer = PyObject_CallOneArg(dh_classify_cb, code);
    ts->tracing--;
    if (answer == NULL) return -1;
    int rc = fill_record(rec, answer);
    Py_DECREF(answer);
    if (rc < 0) {
        dh_clear_lines(rec);
        return -1;
    }
    rec->generation = asked_at; /* a change during classify leaves it stale: asked again next time */
    *out = rec->nlines ? rec : NULL;
    return 0;
}

LineSites *dh_sites_at(CodeRecord *rec, int line) {
    if (rec == NULL) return NULL;
    for (Py_ssize_t i = 0; i < rec->nlines; i++)
        if (rec->lines[i].line == line) return &rec->lines[i];
    return NULL;
}
