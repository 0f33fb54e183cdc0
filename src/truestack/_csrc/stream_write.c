/* Python interface of truestack._native: the program's write of its profile
 * stream, without letting go of the GIL.
 *
 * The collector streams each drain to the recorder through a pipe
 * (recording/pipe_out.py). From Python, the descriptor's check (fstat) and
 * the write each release the GIL; with a program thread waiting for it, each
 * release is a hand-over and a wait to take it back: three acquisitions of
 * the GIL per drain instead of one, and ~100 us of CPU (the wake-ups) per
 * drain on a VM. Here both run with the GIL held. The descriptor must be
 * non-blocking: what does not fit in the pipe now is left to the caller,
 * which waits for room with the GIL released. */
#include "Python.h"
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "stream_write.h"

PyObject *ts_py_stream_write(PyObject *self, PyObject *args) {
    (void)self;
    int fd;
    Py_buffer data;
    unsigned long long dev, ino;
    if (!PyArg_ParseTuple(args, "iy*KK", &fd, &data, &dev, &ino)) return NULL;
    struct stat st;
    Py_ssize_t done = 0;
    if (fstat(fd, &st) != 0 || st.st_dev != (dev_t)dev || st.st_ino != (ino_t)ino) {
        done = -1; /* not that pipe any more: the caller looks for it again */
    } else if (fcntl(fd, F_GETFL) & O_NONBLOCK) {
        while (done < data.len) {
            ssize_t n = write(fd, (const char *)data.buf + done, (size_t)(data.len - done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) break; /* full: the rest is the caller's */
            if (n < 0) {
                PyBuffer_Release(&data);
                return PyErr_SetFromErrno(PyExc_OSError);
            }
            done += n;
        }
    }
    PyBuffer_Release(&data);
    return PyLong_FromSsize_t(done);
}
