/* The agent `truestack attach` loads into a running Python process (`remote/inject.py`: dlopen called
 * by gdb in a thread stopped at a safe point, `remote/gdb_safepoint.py`; or by pyinjector's ptrace
 * wherever the thread was, when forced). Its constructor runs in that thread: it only starts a
 * detached thread and returns. That thread,
 * a fresh one holding no lock of the program's, takes the GIL the ordinary way (PyGILState_Ensure)
 * and runs the line of Python the attacher patched into ts_agent_code. Calling into the interpreter
 * from the stopped thread itself (as `hypno` 1.1 and gdb's `call PyGILState_Ensure()` do) deadlocks
 * when that thread was stopped inside the GIL's own locking: 2 of our first ~15 attaches (hypno) to a
 * program switching the GIL between two threads hung it for good.
 *
 * Built once, loaded into any CPython 3.10-3.13 (it calls three functions every one of them exports
 * with the same signature: PyGILState_Ensure, PyGILState_Release, PyRun_SimpleStringFlags); never imported: the
 * library stays mapped and inert once its thread has run (the attacher does not unload it, as the
 * thread may still be returning through its code). */
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#define TS_AGENT_CODE_MAX 16384

/* Patched in a copy of this file, at the NUL before the marker: the line to run, NUL-terminated. */
volatile char ts_agent_code[TS_AGENT_CODE_MAX + 1] = "\0--- truestack attach agent code ---";

PyMODINIT_FUNC PyInit__attach_agent(void);
PyMODINIT_FUNC PyInit__attach_agent(void) { return NULL; } /* not a module: importing it fails */

static void *run_code(void *unused) {
    (void)unused;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyRun_SimpleStringFlags((const char *)ts_agent_code, NULL);
    PyGILState_Release(gil);
    return NULL;
}

__attribute__((constructor)) static void start_agent(void) {
    if (!ts_agent_code[0]) return; /* the unpatched library */
    int saved_errno = errno;
    /* The thread (and the threads its Python code starts) takes none of the program's signals. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        (void)pthread_create(&thread, &attr, run_code, NULL);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved_errno;
}
