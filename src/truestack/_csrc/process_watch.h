/* The process-creation watch of truestack._native (process_watch.c). */
#ifndef TS_PROCESS_WATCH_H
#define TS_PROCESS_WATCH_H
#include "Python.h"

/* watch_process_events(callback): callback(event, args) for the audit events that create a process. */
PyObject *ts_py_watch_process_events(PyObject *self, PyObject *callback);

#endif
