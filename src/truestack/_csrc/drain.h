#ifndef TS_DRAIN_H
#define TS_DRAIN_H
#include "Python.h"
#include "ts_common.h"

TS_HIDDEN_BEGIN
/* The RawSample struct sequence type drain() returns (made once). */
PyTypeObject *ts_raw_sample_type(void);
/* _native.drain(): every sample the ring holds, oldest first. */
PyObject *ts_py_drain(PyObject *self, PyObject *unused);
TS_HIDDEN_END
#endif
