/* Python interface of truestack._native: the process-creation watch.
 *
 * `record` without --subprocesses names the Python children a program starts
 * (it does not follow them). A Python audit hook is called for every audited event, and `id()`
 * is one (tens per collector sample, and whatever the program does): this C
 * hook filters by name and calls Python only when a process is created.
 * Audit hooks cannot be removed: the callback can be replaced, never dropped. */
#include "Python.h"
#include <string.h>
#include "process_watch.h"

static PyObject *process_event_callback;

static int process_audit_hook(const char *event, PyObject *args, void *data) {
    (void)data;
    if (strncmp(event, "os.", 3) != 0 && strcmp(event, "subprocess.Popen") != 0) return 0;
    if (strcmp(event, "os.fork") != 0 && strcmp(event, "subprocess.Popen") != 0 && strcmp(event, "os.exec") != 0 &&
        strcmp(event, "os.posix_spawn") != 0 && strcmp(event, "os.spawn") != 0)
        return 0;
    PyObject *callback = process_event_callback;
    if (!callback) return 0;
    Py_INCREF(callback);
    PyObject *result = PyObject_CallFunction(callback, "sO", event, args);
    if (result)
        Py_DECREF(result);
    else
        PyErr_WriteUnraisable(callback); /* a note of ours must never stop the program's fork or exec */
    Py_DECREF(callback);
    return 0;
}

PyObject *ts_py_watch_process_events(PyObject *self, PyObject *callback) {
    (void)self;
    static int installed;
    if (!PyCallable_Check(callback)) {
        PyErr_SetString(PyExc_TypeError, "watch_process_events() needs a callable");
        return NULL;
    }
    Py_INCREF(callback);
    Py_XSETREF(process_event_callback, callback);
    if (!installed) {
        if (PySys_AddAuditHook(process_audit_hook, NULL) < 0) return NULL;
        installed = 1;
    }
    Py_RETURN_NONE;
}
