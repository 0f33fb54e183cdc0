/* A wait on a socket that ends in a call run by the main thread: how the
 * attached process learns the attacher's stop and ends its session.
 *
 * A thread waiting for the GIL can wait for seconds in a program whose main
 * thread releases it often (a loop with a short system call): each release
 * wakes the waiter, the main thread takes the GIL back first, and the waiter
 * never times out to ask for it. Waiting for the stop in Python ends in such
 * a wait: the attached session's stop took 9-12 s there, past the attacher's
 * 10 s, and its profile was cut (5 attaches in 6 to a forking loop). Here the
 * read is done without the GIL, and the call is handed to the main thread as
 * a pending call, which it runs at its next eval-breaker check. The caller's
 * thread takes the GIL back only after that. attach_agent.c starts the
 * session the same way. */
#include "main_call.h"
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

/* The main thread, with the GIL. The call's own errors are not the program's
 * and are dropped. A KeyboardInterrupt or SystemExit is the program's (its
 * signal handler ran while the call did): it is raised in the program's code,
 * where it would have been raised without us. */
static int run_call(void *arg) {
    PyObject *call = (PyObject *)arg, *result = PyObject_CallNoArgs(call);
    Py_DECREF(call);
    if (result) {
        Py_DECREF(result);
        return 0;
    }
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* Without the GIL: until `marker` is in one read, the peer closes, or the read fails. */
static void wait_for_marker(int fd, const char *marker, Py_ssize_t marker_len) {
    char buf[256];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        if (memmem(buf, (size_t)n, marker, (size_t)marker_len)) return;
    }
}

PyObject *ts_py_call_in_main_after(PyObject *self, PyObject *args) {
    (void)self;
    int fd;
    Py_buffer marker;
    PyObject *call;
    if (!PyArg_ParseTuple(args, "iy*O:call_in_main_after", &fd, &marker, &call)) return NULL;
    if (!PyCallable_Check(call) || marker.len <= 0) {
        PyBuffer_Release(&marker);
        return PyErr_Format(PyExc_TypeError, "call_in_main_after(fd, marker, call): a non-empty marker, a callable");
    }
    Py_INCREF(call); /* the pending call's reference */
    PyThreadState *waiting = PyEval_SaveThread();
    wait_for_marker(fd, (const char *)marker.buf, marker.len);
    int handed = Py_AddPendingCall(run_call, call) == 0;
    PyEval_RestoreThread(waiting); /* may take seconds: the main thread has the call by then */
    if (!handed) Py_DECREF(call);
    PyBuffer_Release(&marker);
    return PyBool_FromLong(handed);
}
