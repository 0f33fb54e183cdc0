/* truestack._debughook, shared between its files (see debughook.c for the design):
 * debughook_records.c  BreakState and the per-code-object records (co_extra)
 * debughook_decide.c   frame access, conditions and the breakpoint decision
 * debughook.c          the PEP 523 hook (3.10/3.11), LINE callback, module
 */
#ifndef TS_DEBUGHOOK_H
#define TS_DEBUGHOOK_H

#define PY_SSIZE_T_CLEAN
#include "Python.h"
#include "frameobject.h"
#include <stdint.h>
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif

#define TS_HAS_HOOK (PY_VERSION_HEX < 0x030C0000)

#if PY_VERSION_HEX < 0x030D0000
#define PyLong_AsInt _PyLong_AsInt /* public from 3.13 */
#endif

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

/* Where a line event happened. `frame` may be NULL until Python needs it
 * (3.12+: only the interpreter frame is at hand in the LINE callback). */
typedef struct {
    PyFrameObject *frame;  /* borrowed */
    PyObject **localsplus; /* NULL: slots unknown, read none */
    PyObject *globals;     /* borrowed */
} Where;

extern PyTypeObject dh_BreakStateType;
extern Py_ssize_t dh_extra_index;
extern uint64_t dh_generation;
extern PyObject *dh_classify_cb, *dh_stop_cb, *dh_report_cb, *dh_disable_obj;
/* How conditions were decided, for tests and `counters()`: in C from a fast
 * local, by evaluating the code against the named locals, or against f_locals;
 * and line events that reached C (trace_lines, monitor_line). */
extern Py_ssize_t dh_n_simple, dh_n_named_locals, dh_n_f_locals, dh_n_line_events;
extern int dh_mirror_ok;

/* co_extra's layout (Objects/codeobject.c, the same 3.6-3.13), read here
 * directly: the hook probes it on every call, and _PyCode_GetExtra is a
 * function call with checks. dh_lookup() verifies it on the first record it
 * stores and falls back to the API if it ever disagrees. */
typedef struct {
    Py_ssize_t ce_size;
    void *ce_extras[1];
} CodeExtraMirror;

static inline CodeRecord *dh_record_of(PyObject *code) {
    if (!dh_mirror_ok) return NULL;
    CodeExtraMirror *extra = (CodeExtraMirror *)((PyCodeObject *)code)->co_extra;
    return extra != NULL && dh_extra_index < extra->ce_size ? (CodeRecord *)extra->ce_extras[dh_extra_index] : NULL;
}

void dh_free_record(void *p);
/* The current record of `code`: *out is NULL when the code holds no
 * breakpoint. Returns -1 with an exception set on failure. */
int dh_lookup(PyObject *code, CodeRecord **out);
LineSites *dh_sites_at(CodeRecord *rec, int line);

PyCodeObject *dh_frame_code(PyFrameObject *f);
void dh_where_from_frame(Where *w, PyFrameObject *f);
PyFrameObject *dh_where_frame(Where *w);
/* pdb's bdb.effective() on the line's candidates; see debughook_decide.c. */
int dh_decide(CodeRecord *rec, LineSites *ls, Where *w, PyObject **hit, int *delete_ok, Py_ssize_t *hit_no);
/* Decide, and stop (the Python callback) if a breakpoint says so. */
int dh_visit_line(CodeRecord *rec, LineSites *ls, Where *w);

#endif
