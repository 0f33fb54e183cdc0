/* Shared declarations of the truestack._native and truestack._oracle extensions. */
#ifndef TS_COMMON_H
#define TS_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>

/* Marks every function that can run inside the SIGPROF/SIGSEGV handlers:
 * such a function must not malloc, lock, call the Python C API, or touch
 * dynamic TLS. Grep for it when reviewing. The extern ones are
 * declared with hidden visibility (TS_HIDDEN_BEGIN/END in their headers):
 * calls are direct, with no lazily bound PLT entry to resolve in a handler. */
#define TS_SIGNAL_SAFE
#define TS_HIDDEN_BEGIN _Pragma("GCC visibility push(hidden)")
#define TS_HIDDEN_END   _Pragma("GCC visibility pop")

/* Reason codes of an incomplete or suspect walk (index into
 * ts_partial_names, exported to Python as PARTIAL_REASONS). */
enum {
    TS_OK = 0,
    TS_NO_TSTATE = 1,    /* the thread has no Python thread state */
    TS_FAULT = 2,        /* a load faulted (torn or freed memory) */
    TS_BAD_FRAME = 3,    /* a frame pointer failed the plausibility checks */
    TS_BAD_CODE = 4,     /* a frame's code pointer is not a code object */
    TS_BAD_OFFSET = 5,   /* instruction pointer outside the code object */
    TS_TOO_DEEP = 6,     /* chain longer than TS_MAX_WALK (cycle?) */
    TS_TORN = 7,         /* caught mid-update: a suspended generator frame on the
                           chain, a chain ending at a generator frame, or (3.11/3.12)
                           a stack that could not be proven to reach the calling eval
                           loop's frame (the anchor) and was walked from the anchor */
    TS_OTHER_INTERP = 8, /* the thread was running a sub-interpreter: not walked (its code
                             objects have no destroy hook and belong to another GIL) */
    TS_UNGUARDED = 9,    /* someone replaced our SIGSEGV handler since the last drain: not walked */
    TS_NREASONS = 10
};
extern const char *const ts_partial_names[TS_NREASONS];

/* Kinds of frames, in the order of Python's truestack.samples.FrameKind
 * (exported as _native.FRAME_KINDS; a test compares the two). The walker
 * records the first three; TRUNCATED is the resolver's synthetic root. */
enum { TS_KIND_PYTHON = 0, TS_KIND_NATIVE = 1, TS_KIND_SHIM = 2, TS_KIND_TRUNCATED = 3, TS_NKINDS = 4 };
extern const char *const ts_kind_names[TS_NKINDS];

/* Limits, exported as _native.MAX_THREADS and _native.MAX_DEPTH. */
#define TS_MAX_THREADS 4096 /* threads registered at once */
#define TS_MAX_DEPTH   4096 /* frames kept per sample (max_depth) */

/* Sample states (wall mode). */
enum { TS_STATE_UNKNOWN = 0, TS_STATE_RUNNING = 1, TS_STATE_IDLE = 2 };

#define TS_MAX_WALK 200000

/* One raw frame as the handler records it: 12 bytes to keep the ring small. */
typedef struct __attribute__((packed)) {
    void *code;        /* PyCodeObject*; only valid while the code lives */
    uint32_t off_kind; /* byte offset + 2 (so -2 fits) in low 30 bits, kind in top 2 */
} ts_rawframe;

#define TS_OFF_BIAS        2
#define TS_PACK(off, kind) ((uint32_t)(((off) + TS_OFF_BIAS) & 0x3fffffff) | ((uint32_t)(kind) << 30))
#define TS_UNPACK_OFF(v)   ((int)((v)&0x3fffffff) - TS_OFF_BIAS)
#define TS_UNPACK_KIND(v)  ((int)((v) >> 30))

#endif
