/* The profile stream's write of truestack._native, the GIL held (stream_write.c). */
#ifndef TS_STREAM_WRITE_H
#define TS_STREAM_WRITE_H
#include "Python.h"

/* stream_write(fd, data, dev, ino) -> bytes of data written without blocking (0 unless fd is
 * non-blocking), or -1 if fd no longer names that pipe (dev, ino). */
PyObject *ts_py_stream_write(PyObject *self, PyObject *args);

#endif
