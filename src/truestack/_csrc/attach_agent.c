/* The agent `truestack attach` loads into a running Python process (`remote/inject.py`: dlopen called
 * by gdb in a thread stopped at a safe point, `remote/gdb_safepoint.py`; or by pyinjector's ptrace
 * wherever the thread was, when forced). Its constructor runs in that thread: it only starts a
 * detached thread and returns. Calling into the interpreter from the stopped thread itself (as
 * `hypno` 1.1 and gdb's `call PyGILState_Ensure()` do) deadlocks when that thread was stopped inside
 * the GIL's own locking: 2 of our first ~15 attaches (hypno) to a program switching the GIL between
 * two threads hung it for good.
 *
 * The fresh thread, holding no lock of the program's, has the line of Python the attacher patched
 * into ts_agent_code run once:
 * - first by the main thread, as a pending call (Py_AddPendingCall): a busy program's main thread runs
 *   it at its next eval-breaker check. Waiting for the GIL instead can take seconds: a holder that
 *   releases it often (a loop with a short system call, `os.path.exists`) wakes the waiter each time
 *   and takes it back first, so the waiter never times out and never asks for it; 1 attach in 4 to
 *   such a loop gave up after 10 s;
 * - else, when the main thread has slept MAIN_THREAD_WAIT_MS in a row without running it (it is
 *   blocked in C, so the GIL is free or held by another thread), or has not run it within
 *   MAIN_THREAD_GIVEUP_MS, by this thread, taking the GIL the ordinary way. A main thread that runs,
 *   or that the injector's ptrace still holds, is waited for: the fixed 200 ms this used to wait ran
 *   out under pyinjector on a loaded CI machine, and this thread then waited for the GIL past the
 *   attacher's 10 s.
 * Whichever comes first runs it; the other finds it claimed.
 *
 * Built once, loaded into any CPython 3.10-3.13 (it calls four functions every one of them exports
 * with the same signature: Py_AddPendingCall, PyGILState_Ensure, PyGILState_Release,
 * PyRun_SimpleStringFlags); never imported: the library stays mapped and inert once its code has run
 * (the attacher does not unload it: its thread may still be returning through its code, and a
 * pending call not yet run still points into it). */
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TS_AGENT_CODE_MAX 16384

/* Patched in a copy of this file, at the NUL before the marker: the line to run, NUL-terminated. */
volatile char ts_agent_code[TS_AGENT_CODE_MAX + 1] = "\0--- truestack attach agent code ---";

PyMODINIT_FUNC PyInit__attach_agent(void);
PyMODINIT_FUNC PyInit__attach_agent(void) { return NULL; } /* not a module: importing it fails */

#define MAIN_THREAD_WAIT_MS   200  /* asleep that long in a row: blocked in C */
#define MAIN_THREAD_GIVEUP_MS 3000 /* running that long without an eval-breaker check: blocked in C too */

static atomic_int code_claimed; /* 1 once a thread holding the GIL has taken the code to run */

static void run_code_once(void) { /* the GIL held */
    int expected = 0;
    if (atomic_compare_exchange_strong(&code_claimed, &expected, 1))
        PyRun_SimpleStringFlags((const char *)ts_agent_code, NULL);
}

static int run_in_main_thread(void *unused) {
    (void)unused;
    run_code_once();
    return 0; /* never an error: the program's own code runs on */
}

/* The main thread's scheduler state ('R' running, 'S' sleeping, 't' stopped by a tracer...), '?' unread. */
static char main_thread_state(void) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return '?';
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return '?';
    buf[n] = '\0';
    const char *end = strrchr(buf, ')'); /* the command name may hold spaces and ')' */
    return end && end[1] == ' ' ? end[2] : '?';
}

static void *run_code(void *unused) {
    (void)unused;
    if (Py_AddPendingCall(run_in_main_thread, NULL) == 0) {
        /* The main thread is given the code while it runs, or is held by the injector's ptrace
         * (which may outlast MAIN_THREAD_WAIT_MS on a loaded machine): it reaches an eval-breaker
         * check soon after. Only a main thread asleep for MAIN_THREAD_WAIT_MS in a row is taken to
         * be blocked in C. Taking the GIL here while the main thread runs can take seconds. */
        const struct timespec one_ms = {0, 1000000};
        int asleep = 0;
        for (int waited = 0; waited < MAIN_THREAD_GIVEUP_MS && asleep < MAIN_THREAD_WAIT_MS; waited++) {
            if (atomic_load(&code_claimed)) return NULL;
            char state = main_thread_state();
            asleep = state == 'S' || state == 'D' ? asleep + 1 : 0;
            nanosleep(&one_ms, NULL);
        }
        if (atomic_load(&code_claimed)) return NULL;
    }
    PyGILState_STATE gil = PyGILState_Ensure();
    run_code_once();
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
