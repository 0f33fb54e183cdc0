/* call_in_main_after (main_call.c): a socket wait without the GIL that hands a call to the main thread. */
#ifndef TS_MAIN_CALL_H
#define TS_MAIN_CALL_H
#include <Python.h>

PyObject *ts_py_call_in_main_after(PyObject *self, PyObject *args);

#endif
