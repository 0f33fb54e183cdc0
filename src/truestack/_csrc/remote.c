/* truestack._remote: the sampler's walker (walker.c, compiled a second time
 * with TS_REMOTE_LOADS) reading another process of the same Python version
 * through process_vm_readv, for `truestack dump`. Nothing here runs in a
 * signal handler; the target is never stopped and never runs our code.
 *
 * The walker's layout (ts_L) comes from this interpreter's compiled headers
 * (layout.c), as in the sampler; only the addresses that differ between
 * processes (type objects, the main interpreter) are the target's, given by
 * the caller. OFFSETS lends the same headers' offsets to the Python side
 * (truestack.remote), which reads threads, code objects and values. */
#include "Python.h"
#include "frameobject.h"
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
/* 3.13's pycore_object.h (pulled in by pycore_dict.h) has an unused parameter. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "internal/pycore_dict.h"
#pragma GCC diagnostic pop
#endif
#include "internal/pycore_runtime.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_gil.h"
#if PY_VERSION_HEX >= 0x030C0000
#include "internal/pycore_pystate.h"
#endif
#include "safeload.h"
#include "ts_version.h"
#include "walker.h"

static pid_t target_pid;
static int read_errno; /* the first errno of a failed read other than EFAULT (EPERM, ESRCH) */
static uintptr_t frame_addrs[TS_MAX_DEPTH];

uint64_t ts_remote_load(uintptr_t addr, int *fault) {
    uint64_t word = 0;
    struct iovec local = {&word, sizeof word}, remote = {(void *)addr, sizeof word};
    if (process_vm_readv(target_pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof word) {
        if (errno != EFAULT && !read_errno) read_errno = errno;
        *fault = 1;
        return 0;
    }
    return word;
}

void ts_remote_note_frame(int i, uintptr_t frame) {
    if (i >= 0 && i < TS_MAX_DEPTH) frame_addrs[i] = frame;
}

static PyObject *raise_read_errno(int err) {
    errno = err;
    return PyErr_SetFromErrno(PyExc_OSError);
}

static PyObject *py_open(PyObject *self, PyObject *arg) {
    (void)self;
    long pid = PyLong_AsLong(arg);
    if (pid == -1 && PyErr_Occurred()) return NULL;
    if (pid <= 0) return PyErr_Format(PyExc_ValueError, "bad pid %ld", pid);
    target_pid = (pid_t)pid;
    read_errno = 0;
    Py_RETURN_NONE;
}

static PyObject *py_read(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long addr;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "Kn", &addr, &n)) return NULL;
    if (n < 0 || n > (1 << 24)) return PyErr_Format(PyExc_ValueError, "read size out of range");
    if (!target_pid) return PyErr_Format(PyExc_RuntimeError, "open(pid) first");
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (!out || n == 0) return out;
    struct iovec local = {PyBytes_AS_STRING(out), (size_t)n}, remote = {(void *)(uintptr_t)addr, (size_t)n};
    ssize_t got = process_vm_readv(target_pid, &local, 1, &remote, 1, 0);
    if (got != n) {
        int err = got < 0 ? errno : EFAULT;
        Py_DECREF(out);
        return raise_read_errno(err);
    }
    return out;
}

static PyObject *py_configure(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long interp, code, frame, gen, coro, agen;
    if (!PyArg_ParseTuple(args, "KKKKKK", &interp, &code, &frame, &gen, &coro, &agen)) return NULL;
    ts_L.main_interp = (const void *)(uintptr_t)interp;
    ts_L.code_type = (const void *)(uintptr_t)code;
    ts_L.frame_type = (const void *)(uintptr_t)frame;
    ts_L.gen_type = (const void *)(uintptr_t)gen;
    ts_L.coro_type = (const void *)(uintptr_t)coro;
    ts_L.asyncgen_type = (const void *)(uintptr_t)agen;
    Py_RETURN_NONE;
}

static PyObject *py_walk(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long tstate;
    int max_depth;
    if (!PyArg_ParseTuple(args, "Ki", &tstate, &max_depth)) return NULL;
    if (max_depth < 1 || max_depth > TS_MAX_DEPTH) return PyErr_Format(PyExc_ValueError, "max_depth out of range");
    if (!target_pid) return PyErr_Format(PyExc_RuntimeError, "open(pid) first");
    ts_rawframe *buf = PyMem_Malloc(sizeof(ts_rawframe) * (size_t)max_depth);
    if (!buf) return PyErr_NoMemory();
    ts_walk_result r;
    read_errno = 0;
    ts_walk((void *)(uintptr_t)tstate, buf, max_depth, &r);
    if (read_errno && read_errno != EFAULT && read_errno != EIO) {
        PyMem_Free(buf);
        return raise_read_errno(read_errno);
    }
    PyObject *frames = PyList_New(r.nframes);
    for (int i = 0; frames && i < r.nframes; i++) {
        PyObject *item = Py_BuildValue("(KKi)", (unsigned long long)frame_addrs[i],
                                       (unsigned long long)(uintptr_t)buf[i].code, TS_UNPACK_OFF(buf[i].off_kind));
        if (!item)
            Py_CLEAR(frames);
        else
            PyList_SET_ITEM(frames, i, item);
    }
    PyMem_Free(buf);
    if (!frames) return NULL;
    return Py_BuildValue("(Niz)", frames, r.depth, r.partial ? ts_partial_names[r.partial] : NULL);
}

const char *const ts_partial_names[TS_NREASONS] = {
    NULL,         "no_thread_state", "fault", "bad_frame",      "bad_code",
    "bad_offset", "too_deep",        "torn",  "subinterpreter", "unguarded",
};

/* 3.10 keeps only the pthread_t: the kernel tid sits in glibc's thread
 * descriptor at an offset found on this thread (same libc as the target's
 * when both run on this machine; the caller checks the tid it reads). */
static long pthread_tid_offset(void) {
    int self = (int)syscall(SYS_gettid);
    const char *desc = (const char *)pthread_self();
    for (long off = 0; off < 4096; off += 4) {
        int v;
        memcpy(&v, desc + off, sizeof v);
        if (v == self) return off;
    }
    return -1;
}

#define OFF(name, value)                                                                                               \
    do {                                                                                                               \
        PyObject *v_ = PyLong_FromLong((long)(value));                                                                 \
        if (!v_ || PyDict_SetItemString(d, (name), v_) < 0) {                                                          \
            Py_XDECREF(v_);                                                                                            \
            Py_DECREF(d);                                                                                              \
            return NULL;                                                                                               \
        }                                                                                                              \
        Py_DECREF(v_);                                                                                                 \
    } while (0)

static PyObject *offsets(void) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    OFF("runtime_main_interp", offsetof(_PyRuntimeState, interpreters.main));
    OFF("ts_next", offsetof(PyThreadState, next));
    OFF("ts_interp", offsetof(PyThreadState, interp));
    OFF("ts_thread_id", offsetof(PyThreadState, thread_id));
    OFF("ts_native_thread_id", ts_L.ts_native_tid);
    OFF("pthread_tid", pthread_tid_offset());
    OFF("gil_locked", offsetof(struct _gil_runtime_state, locked));
    OFF("gil_last_holder", offsetof(struct _gil_runtime_state, last_holder));
#if PY_VERSION_HEX >= 0x030C0000
    OFF("runtime_gil", -1);
    OFF("interp_gil_ptr", offsetof(PyInterpreterState, ceval.gil));
#else
    OFF("runtime_gil", offsetof(_PyRuntimeState, ceval.gil));
    OFF("interp_gil_ptr", -1);
#endif
#if PY_VERSION_HEX >= 0x030B0000
    OFF("interp_threads_head", offsetof(PyInterpreterState, threads.head));
    OFF("co_qualname", offsetof(PyCodeObject, co_qualname));
    OFF("co_localsplusnames", offsetof(PyCodeObject, co_localsplusnames));
    OFF("co_localspluskinds", offsetof(PyCodeObject, co_localspluskinds));
    OFF("co_nlocalsplus", offsetof(PyCodeObject, co_nlocalsplus));
    OFF("co_varnames", -1);
    OFF("frame_localsplus", offsetof(_PyInterpreterFrame, localsplus));
    OFF("dk_log2_size", offsetof(PyDictKeysObject, dk_log2_size));
    OFF("dk_log2_index_bytes", offsetof(PyDictKeysObject, dk_log2_index_bytes));
    OFF("dk_kind", offsetof(PyDictKeysObject, dk_kind));
    OFF("dk_nentries", offsetof(PyDictKeysObject, dk_nentries));
    OFF("dk_indices", offsetof(PyDictKeysObject, dk_indices));
    OFF("dict_values_items", offsetof(PyDictValues, values));
    OFF("ht_cached_keys", offsetof(PyHeapTypeObject, ht_cached_keys));
#else
    OFF("interp_threads_head", offsetof(PyInterpreterState, tstate_head));
    OFF("co_qualname", -1);
    OFF("co_localsplusnames", -1);
    OFF("co_localspluskinds", -1);
    OFF("co_nlocalsplus", -1);
    OFF("co_varnames", offsetof(PyCodeObject, co_varnames));
    OFF("co_cellvars", offsetof(PyCodeObject, co_cellvars));
    OFF("co_freevars", offsetof(PyCodeObject, co_freevars));
    OFF("frame_localsplus", offsetof(PyFrameObject, f_localsplus));
    /* 3.10's PyDictKeysObject is private to Objects/dict-common.h:
     * dk_refcnt, dk_size, dk_lookup, dk_usable, dk_nentries, dk_indices[]. */
    OFF("dk_size", 8);
    OFF("dk_nentries", 32);
    OFF("dk_indices", 40);
    OFF("dict_values_items", 0); /* ma_values is a PyObject ** */
    OFF("ht_cached_keys", offsetof(PyHeapTypeObject, ht_cached_keys));
#endif
    OFF("co_nlocals", offsetof(PyCodeObject, co_nlocals));
    OFF("co_name", offsetof(PyCodeObject, co_name));
    OFF("co_filename", offsetof(PyCodeObject, co_filename));
    OFF("co_firstlineno", offsetof(PyCodeObject, co_firstlineno));
    OFF("co_linetable", offsetof(PyCodeObject, co_linetable));
    OFF("ob_type", offsetof(PyObject, ob_type));
    OFF("ob_size", offsetof(PyVarObject, ob_size));
    OFF("tp_name", offsetof(PyTypeObject, tp_name));
    OFF("tp_flags", offsetof(PyTypeObject, tp_flags));
    OFF("tp_basicsize", offsetof(PyTypeObject, tp_basicsize));
    OFF("tp_dictoffset", offsetof(PyTypeObject, tp_dictoffset));
    OFF("str_length", offsetof(PyASCIIObject, length));
    OFF("str_state", offsetof(PyASCIIObject, state));
    OFF("str_ascii_data", sizeof(PyASCIIObject));
    OFF("str_compact_data", sizeof(PyCompactUnicodeObject));
    OFF("bytes_data", offsetof(PyBytesObject, ob_sval));
    OFF("tuple_items", offsetof(PyTupleObject, ob_item));
    OFF("list_items", offsetof(PyListObject, ob_item));
    OFF("float_value", offsetof(PyFloatObject, ob_fval));
    OFF("cell_ref", offsetof(PyCellObject, ob_ref));
    OFF("func_qualname", offsetof(PyFunctionObject, func_qualname));
#if PY_VERSION_HEX >= 0x030C0000
    OFF("long_tag", offsetof(PyLongObject, long_value.lv_tag));
    OFF("long_digits", offsetof(PyLongObject, long_value.ob_digit));
#else
    OFF("long_tag", -1);
    OFF("long_digits", offsetof(PyLongObject, ob_digit));
#endif
    OFF("long_shift", PyLong_SHIFT);
    OFF("dict_used", offsetof(PyDictObject, ma_used));
    OFF("dict_keys", offsetof(PyDictObject, ma_keys));
    OFF("dict_values", offsetof(PyDictObject, ma_values));
#if PY_VERSION_HEX >= 0x030D0000
    OFF("runtime_debug_offsets", offsetof(_PyRuntimeState, debug_offsets));
    OFF("debug_offsets_size", sizeof(_Py_DebugOffsets));
    OFF("debug_offsets_version", offsetof(_Py_DebugOffsets, version));
#else
    OFF("runtime_debug_offsets", -1);
#endif
    return d;
}

static PyObject *py_own_debug_offsets(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
#if PY_VERSION_HEX >= 0x030D0000
    return PyBytes_FromStringAndSize((const char *)&_PyRuntime.debug_offsets, sizeof(_Py_DebugOffsets));
#else
    Py_RETURN_NONE;
#endif
}

static PyMethodDef methods[] = {
    {"open", py_open, METH_O, "open(pid): read that process from now on (process_vm_readv; nothing is attached)."},
    {"read", py_read, METH_VARARGS, "read(addr, n) -> bytes read from the target; OSError (errno) if not all of it."},
    {"configure", py_configure, METH_VARARGS,
     "configure(main_interp, code_type, frame_type, gen_type, coro_type, asyncgen_type): the target's addresses."},
    {"walk", py_walk, METH_VARARGS,
     "walk(tstate, max_depth) -> ([(frame, code, byte_offset)] leaf first, true_depth, partial_reason_or_None)"},
    {"own_debug_offsets", py_own_debug_offsets, METH_NOARGS,
     "This interpreter's _Py_DebugOffsets as bytes (3.13+), else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, .m_name = "truestack._remote",
                                    .m_doc = "The sampler's frame walker reading another process (truestack dump).",
                                    .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__remote(void) {
    if (ts_layout_init() < 0) return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    PyObject *d = offsets();
    if (!d || PyModule_AddObject(m, "OFFSETS", d) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_HEX", PY_VERSION_HEX) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DEPTH", TS_MAX_DEPTH) < 0) {
        Py_XDECREF(d);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
