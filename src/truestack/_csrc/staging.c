#include "staging.h"
#include "ring.h"
#include "sampler.h"
#include <stdlib.h>
#include <string.h>

ts_staging ts_S;
uint64_t ts_codes_resolved_at_death;
uint64_t ts_settle_calls, ts_settle_folds;

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *p = realloc(*arr, c * elem);
    if (!p) return -1;
    *arr = p;
    *cap = c;
    return 0;
}

PyObject *ts_code_identity(PyObject *code) {
    PyCodeObject *co = (PyCodeObject *)code;
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *name = co->co_qualname;
#else
    PyObject *name = co->co_name;
#endif
    return Py_BuildValue("(OOi)", name, co->co_filename, co->co_firstlineno);
}

void ts_fold(PyObject *dying, int wait_busy) {
    /* No Python allocation inside the loop: an allocation can run the GC,
     * the GC can free a code object, and its hook would fold re-entrantly
     * while this loop holds a slot. The dying code's identity is built
     * before the loop; its lines need no allocation. */
    PyObject *ident = NULL;
    if (dying) {
        ident = ts_code_identity(dying);
        if (!ident) PyErr_Clear();
    }
    /* For a dying code object only the slots claimed before now can hold it
     * (ts_ring_may_hold: a walk claims its slot before it reads a frame, and
     * no live frame holds a dying code). Folding past them would chase a
     * producer that keeps claiming: a remote walk held ~1 ms at a time by a
     * preempted control thread kept one `del` of a function folding for
     * 68 ms (median) to 0.5 s, waiting on each new slot in turn. */
    uint64_t end = dying ? atomic_load_explicit(&ts_R.head, memory_order_acquire) : TS_RING_ALL;
    ts_slot *s;
    while ((s = ts_ring_peek(wait_busy, end)) != NULL) {
        if (s->tid == TS_VOID_TID) {
            ts_ring_release(s);
            continue;
        }
        size_t nsegs = s->nsegs == 0xff ? 0 : s->nsegs, nwords = (size_t)s->nnative + nsegs;
        if (grow((void **)&ts_S.samples, &ts_S.cap, ts_S.n + 1, sizeof(ts_ssample)) ||
            grow((void **)&ts_S.frames, &ts_S.capf, ts_S.nf + s->nframes, sizeof(ts_sframe)) ||
            grow((void **)&ts_S.words, &ts_S.capw, ts_S.nw + nwords, sizeof(uint64_t))) {
            atomic_fetch_add(&ts_C.dropped, 1); /* out of memory: lose the sample, never a wrong one */
            ts_ring_release(s);
            continue;
        }
        ts_ssample *d = &ts_S.samples[ts_S.n++];
        d->tid = s->tid;
        d->state = s->state;
        d->partial = s->partial;
        d->depth = s->depth;
        d->time_ns = s->time_ns;
        d->weight_ns = s->weight_ns;
        d->cpu_delta_ns = s->cpu_delta_ns;
        d->coro = s->coro;
        d->first = ts_S.nf;
        d->first_word = ts_S.nw;
        d->nnative = s->nnative;
        d->nsegs = s->nsegs;
        d->native_why = s->native_why;
        if (nwords) {
            memcpy(ts_S.words + ts_S.nw, ts_slot_ips(s), sizeof(uint64_t) * s->nnative);
            for (size_t i = 0; i < nsegs; i++) ts_S.words[ts_S.nw + s->nnative + i] = ts_slot_segs(s)[i];
            ts_S.nw += nwords;
        }
        uint32_t kept = 0;
        for (uint32_t i = 0; i < s->nframes; i++) {
            PyObject *code = (PyObject *)s->frames[i].code;
            int off = TS_UNPACK_OFF(s->frames[i].off_kind);
            int kind = TS_UNPACK_KIND(s->frames[i].off_kind);
            PyObject *obj;
            if (code == dying) {
                if (!ident) continue;
                int line = PyCode_Addr2Line((PyCodeObject *)code, off < 0 ? 0 : off);
                obj = Py_NewRef(ident);
                off = line < 0 ? 0 : line;
                kind |= TS_KIND_RESOLVED;
                ts_codes_resolved_at_death++;
            } else {
                obj = Py_NewRef(code);
            }
            ts_sframe *f = &ts_S.frames[ts_S.nf++];
            f->obj = obj;
            f->off = off;
            f->kind = kind;
            kept++;
        }
        d->nframes = kept;
        ts_ring_release(s);
    }
    Py_XDECREF(ident);
}

ts_staging ts_staging_take(void) {
    ts_staging out = ts_S;
    ts_S.samples = NULL;
    ts_S.frames = NULL;
    ts_S.words = NULL;
    ts_S.n = ts_S.cap = ts_S.nf = ts_S.capf = ts_S.nw = ts_S.capw = 0;
    return out;
}

void ts_staging_forget_after_fork(void) {
    /* The parent's samples: leak the pins rather than report them twice. */
    ts_S.n = 0;
    ts_S.nf = 0;
    ts_S.nw = 0;
}

/* -- destroy hook ------------------------------------------------------ */

static void settle(PyObject *code) {
    ts_settle_calls++;
    /* Folds only when a pending sample holds the dying code. Folding at every
     * death while anything is pending would fold after nearly every sample in
     * a program that drops code objects at a high rate (each fold builds the
     * dying code's identity and pins every frame's code), and the pins would
     * move those deaths to the collector's drain. */
    if (!ts_ring_may_hold(code)) return;
    ts_settle_folds++;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    ts_fold(code, 1); /* a stuck slot is abandoned after 2 ms (ts_ring_abandoned) */
    PyErr_Restore(et, ev, tb);
}

#if PY_VERSION_HEX >= 0x030C0000
static int code_watcher(PyCodeEvent event, PyCodeObject *co) {
    if (event == PY_CODE_EVENT_DESTROY) settle((PyObject *)co);
    return 0;
}
static int hook_installed;
int ts_codehook_install(void) {
    if (hook_installed) return 0;
    if (PyCode_AddWatcher(code_watcher) < 0) return -1;
    hook_installed = 1;
    return 0;
}
const char *ts_codehook_kind(void) { return "PyCode_AddWatcher"; }
#else
static destructor orig_code_dealloc;
static void code_dealloc_hook(PyObject *co) {
    settle(co);
    orig_code_dealloc(co);
}
int ts_codehook_install(void) {
    if (orig_code_dealloc) return 0;
    orig_code_dealloc = PyCode_Type.tp_dealloc;
    PyCode_Type.tp_dealloc = code_dealloc_hook;
    return 0;
}
const char *ts_codehook_kind(void) { return "PyCode_Type.tp_dealloc wrapper"; }
#endif
