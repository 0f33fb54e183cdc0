#ifndef TS_DRAIN_H
#define TS_DRAIN_H
#include "Python.h"
#include "ts_common.h"

TS_HIDDEN_BEGIN
/* The RawSample struct sequence type drain() returns (made once). */
PyTypeObject *ts_raw_sample_type(void);
/* _native.drain(resolve_frame=None, finish=None): every sample the ring
 * holds, oldest first; with the resolvers, their frames come resolved
 * through the stack cache (stackcache.h). */
PyObject *ts_py_drain(PyObject *self, PyObject *args);
TS_HIDDEN_END
#endif
