/* drain(): the samples the signal handler left in the ring, as RawSample
 * struct sequences for the collector (engines/native.py). */
#include "drain.h"
#include "cfi.h"
#include "safeload.h"
#include "sampler.h"
#include "stackcache.h"
#include "staging.h"
#include "unwind.h"
#include "wordcache.h"

static const char *const state_names[] = {"unknown", "running", "idle"};

/* The few strings every sample carries, made once (interned). */
static PyObject *state_str[3], *partial_str[TS_NREASONS];

static PyObject *interned(PyObject **slot, const char *text) {
    if (!*slot) *slot = PyUnicode_InternFromString(text);
    return Py_XNewRef(*slot);
}

static PyObject *partial_of(const ts_ssample *s) {
    return s->partial ? interned(&partial_str[s->partial % TS_NREASONS], ts_partial_names[s->partial % TS_NREASONS])
                      : Py_NewRef(Py_None);
}

static PyObject *build_frames(ts_staging *st, ts_ssample *s) {
    PyObject *t = PyTuple_New((Py_ssize_t)s->nframes * 2);
    if (!t) return NULL;
    for (uint32_t i = 0; i < s->nframes; i++) {
        ts_sframe *f = &st->frames[s->first + i];
        PyTuple_SET_ITEM(t, 2 * i, f->obj); /* steals the pin */
        f->obj = NULL;
        PyObject *off = PyLong_FromLong(f->off);
        if (!off) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, 2 * i + 1, off);
    }
    return t;
}

/* drain() returns RawSample struct sequences: fields by name for Python,
 * no per-sample dict. */
static PyTypeObject *raw_sample_type;
static PyStructSequence_Field raw_sample_fields[] = {
    {"tid", "native thread id"},
    {"time_ns", "CLOCK_MONOTONIC time of the sample"},
    {"weight_ns", "CPU ns (cpu mode) or wall ns (wall mode) the sample stands for"},
    {"cpu_delta_ns", "CPU ns the thread used since its previous sample"},
    {"state", "'unknown', 'running' or 'idle'"},
    {"depth", "true stack depth (may exceed the frames kept)"},
    {"partial", "reason the walk was incomplete or suspect, or None"},
    {"frames", "flat leaf-first (obj, n, ...): code object and byte offset, or (qualname, file, firstlineno) and line"},
    {"native", "--native: the C return addresses, leaf first; None without --native"},
    {"segments", "--native: frames recorded once each eval-loop C call ended, leaf first; None if unknown"},
    {"native_missing", "--native: why native frames are missing or incomplete, or None"},
    {"coro", "address (id) of the outermost coroutine on the stack, or 0"},
    {NULL, NULL},
};
#define RAW_FIELDS 12
static PyStructSequence_Desc raw_sample_desc = {"truestack._native.RawSample", "One raw sample as drained.",
                                                raw_sample_fields, RAW_FIELDS};

PyTypeObject *ts_raw_sample_type(void) {
    if (!raw_sample_type) raw_sample_type = PyStructSequence_NewType(&raw_sample_desc);
    return raw_sample_type;
}

static PyObject *raw_sample(ts_staging *st, ts_ssample *s, PyObject *frames, PyObject *partial) {
    PyObject *item = PyStructSequence_New(raw_sample_type);
    if (!item) return NULL;
    int off = s->native_why == TS_NATIVE_OFF;
    const uint64_t *w = st->words + s->first_word;
    PyObject *values[RAW_FIELDS] = {
        PyLong_FromLong(s->tid),
        PyLong_FromLongLong((long long)s->time_ns),
        PyLong_FromUnsignedLongLong((unsigned long long)s->weight_ns),
        PyLong_FromUnsignedLongLong((unsigned long long)s->cpu_delta_ns),
        interned(&state_str[s->state % 3], state_names[s->state % 3]),
        PyLong_FromUnsignedLong(s->depth),
        Py_NewRef(partial),
        Py_NewRef(frames),
        off ? Py_NewRef(Py_None) : ts_wordcache_tuple(w, s->nnative),
        off || s->nsegs == 0xff ? Py_NewRef(Py_None) : ts_wordcache_tuple(w + s->nnative, s->nsegs),
        s->native_why ? PyUnicode_FromString(ts_native_reason_names[s->native_why % TS_NNATIVE_REASONS])
                      : Py_NewRef(Py_None),
        PyLong_FromUnsignedLongLong((unsigned long long)s->coro),
    };
    for (int i = 0; i < RAW_FIELDS; i++) {
        if (!values[i]) {
            for (int j = 0; j < RAW_FIELDS; j++) Py_XDECREF(values[j]);
            Py_DECREF(item);
            return NULL;
        }
    }
    for (int i = 0; i < RAW_FIELDS; i++) PyStructSequence_SET_ITEM(item, i, values[i]);
    return item;
}

PyObject *ts_py_drain(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *resolve_frame = Py_None, *finish = Py_None;
    int shims = 0; /* --native: shims stay in as None, and native samples are cached too */
    if (!PyArg_ParseTuple(args, "|OOp:drain", &resolve_frame, &finish, &shims)) return NULL;
    int cached = resolve_frame != Py_None;
    if (cached && !(PyCallable_Check(resolve_frame) && PyCallable_Check(finish)))
        return PyErr_Format(PyExc_TypeError, "drain(resolve_frame, finish): both must be callable");
    /* faulthandler.enable()/disable() or another tool may have replaced our
     * SIGSEGV handler: put it back on top, chaining to theirs. */
    if (ts_sampler_active() && ts_safeload_install() != 0) return PyErr_SetFromErrno(PyExc_OSError);
    if (shims) ts_cfi_refresh(); /* --native: a module loaded since the last drain */
    ts_fold(NULL, 0);
    ts_staging st = ts_staging_take();
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out && i < st.n; i++) {
        ts_ssample *s = &st.samples[i];
        PyObject *partial = partial_of(s), *frames = NULL;
        if (partial && cached && (shims || s->native_why == TS_NATIVE_OFF))
            frames = ts_stackcache_get(&st, s, partial, resolve_frame, finish, shims);
        else if (partial)
            frames = build_frames(&st, s);
        PyObject *item = frames ? raw_sample(&st, s, frames, partial) : NULL;
        Py_XDECREF(frames);
        Py_XDECREF(partial);
        if (!item || PyList_Append(out, item) < 0) Py_CLEAR(out);
        Py_XDECREF(item);
    }
    for (size_t i = 0; i < st.nf; i++) Py_XDECREF(st.frames[i].obj); /* left over after an error */
    free(st.samples);
    free(st.frames);
    free(st.words);
    return out;
}
