/* Synchronous layer: at a function entry, with the GIL, the walker's result
 * for this very thread must equal the interpreter's frame chain (what
 * sys._getframe() walks): every frame, in order, same code object, same
 * line. The same chain also checks the shadow stack (the ground the async
 * layer stands on) and reseeds it when it drifted. */
#include "validate_state.h"

_Atomic uint64_t ts_v_checked[TS_V_NLAYERS];
_Atomic uint64_t ts_v_counts[TS_V_NLAYERS][TS_V_NKINDS];
_Atomic uint64_t ts_v_partial_reasons[TS_NREASONS];

/* First example of each (sync or shadow layer, kind), rendered at once
 * while every code object in it is alive. */
static PyObject *sync_examples; /* list of dicts */
static uint8_t have_example[TS_V_NLAYERS][TS_V_NKINDS];

/* "qualname (file:line)" for a live code object. */
PyObject *ts_v_describe(PyObject *code, int line_or_offset, int is_offset) {
    PyCodeObject *co = (PyCodeObject *)code;
    int line = is_offset ? PyCode_Addr2Line(co, line_or_offset) : line_or_offset;
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *name = co->co_qualname;
#else
    PyObject *name = co->co_name;
#endif
    return PyUnicode_FromFormat("%U (%U:%d)", name, co->co_filename, line);
}

static PyObject *render_side(void *const *codes, const int *vals, int n, int is_offset) {
    int start = n > TS_V_EX_CAP ? n - TS_V_EX_CAP : 0;
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    for (int i = start; i < n; i++) {
        PyObject *s = ts_v_describe((PyObject *)codes[i], vals[i], is_offset);
        if (!s || PyList_Append(list, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(s);
    }
    return list;
}

static void keep_example(int layer, int kind, ts_vshadow *sh, PyObject *got, int got_depth, PyObject *want,
                         int want_depth, int faulted) {
    if (!got || !want) goto out;
    if (!sync_examples && !(sync_examples = PyList_New(0))) goto out;
    PyObject *d =
        Py_BuildValue("{s:s,s:s,s:i,s:O,s:i,s:O,s:i,s:O}", "layer", ts_v_layer_names[layer], "kind",
                      ts_v_kind_names[kind], "thread_id", sh->tid, "got", got, "got_depth", got_depth, "expected", want,
                      "expected_depth", want_depth, "fault_injected", faulted ? Py_True : Py_False);
    if (d) {
        if (PyList_Append(sync_examples, d) == 0) have_example[layer][kind] = 1;
        Py_DECREF(d);
    }
out:
    Py_XDECREF(got);
    Py_XDECREF(want);
    PyErr_Clear();
}

static void count(int layer, int kind) {
    atomic_fetch_add_explicit(&ts_v_checked[layer], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ts_v_counts[layer][kind], 1, memory_order_relaxed);
}

void ts_v_sync_check(ts_vshadow *sh, PyFrameObject *leaf) {
    sh->busy = 1; /* the async handler shares sh's scratch arrays */
    atomic_signal_fence(memory_order_seq_cst);
    int tdw, reason, faulted;
    int nw = ts_v_walk(sh, &tdw, &reason, &faulted);
    int tds;
    int nt = ts_v_truth(leaf, sh->tcodes, sh->tlines, TS_V_WALK_CAP, &tds);

    /* Shadow layer: the event-kept mirror against the chain. */
    int depth = sh->depth;
    int kind = ts_v_classify((void *const *)sh->codes, depth, depth, sh->tcodes, nt, tds, 0);
    count(TS_V_SHADOW, kind);
    if (kind != TS_V_OK) {
        if (!have_example[TS_V_SHADOW][kind]) {
            /* Shadow entries past a missed return may be dead: show names
             * only for entries also on the live chain. */
            PyObject *got = PyList_New(0);
            for (int i = depth > TS_V_EX_CAP ? depth - TS_V_EX_CAP : 0; got && i < depth; i++) {
                int live = 0;
                for (int j = 0; j < nt && !live; j++) live = sh->tcodes[j] == sh->codes[i];
                PyObject *s = live ? ts_v_describe((PyObject *)sh->codes[i], 0, 0)
                                   : PyUnicode_FromFormat("<code %p, not on the stack>", sh->codes[i]);
                if (!s || PyList_Append(got, s) < 0) Py_CLEAR(got);
                Py_XDECREF(s);
            }
            keep_example(TS_V_SHADOW, kind, sh, got, depth, render_side(sh->tcodes, sh->tlines, nt, 0), tds, 0);
        }
        if (tds <= TS_V_WALK_CAP) {
            ts_v_reseed(sh, sh->tcodes, nt);
            atomic_fetch_add(&ts_v_resyncs, 1);
        }
    }

    /* Sync layer: the walker against the chain, lines included. */
    if (reason != TS_OK) {
        kind = TS_V_PARTIAL;
        if (reason > 0 && reason < TS_NREASONS) atomic_fetch_add(&ts_v_partial_reasons[reason], 1);
    } else {
        kind = ts_v_classify(sh->wcodes, nw, tdw, sh->tcodes, nt, tds, 0);
        if (kind == TS_V_BOUNDARY) kind = TS_V_MISSING; /* no boundary exists at a synchronous check */
        if (kind == TS_V_OK) {
            int off_t = tds - nt, off_w = tdw - nw;
            for (int p = off_t > off_w ? off_t : off_w; p < tds; p++) {
                int iw = p - off_w, it = p - off_t;
                if (PyCode_Addr2Line((PyCodeObject *)sh->wcodes[iw], sh->woffs[iw]) != sh->tlines[it]) {
                    kind = TS_V_WRONG_LINE;
                    break;
                }
            }
        }
    }
    count(TS_V_SYNC, kind);
    if (kind != TS_V_OK && !have_example[TS_V_SYNC][kind]) {
        /* Walker frames are all live here only if they are on the chain. */
        PyObject *got = PyList_New(0);
        for (int i = nw > TS_V_EX_CAP ? nw - TS_V_EX_CAP : 0; got && i < nw; i++) {
            int live = 0;
            for (int j = 0; j < nt && !live; j++) live = sh->tcodes[j] == sh->wcodes[i];
            PyObject *s = live ? ts_v_describe((PyObject *)sh->wcodes[i], sh->woffs[i], 1)
                               : PyUnicode_FromFormat("<code %p, not on the stack>", sh->wcodes[i]);
            if (!s || PyList_Append(got, s) < 0) Py_CLEAR(got);
            Py_XDECREF(s);
        }
        keep_example(TS_V_SYNC, kind, sh, got, tdw, render_side(sh->tcodes, sh->tlines, nt, 0), tds, faulted);
    }
    atomic_signal_fence(memory_order_seq_cst);
    sh->busy = 0;
}

PyObject *ts_v_sync_examples(void) {
    if (!sync_examples) return PyList_New(0);
    return PyList_GetSlice(sync_examples, 0, PyList_GET_SIZE(sync_examples));
}
