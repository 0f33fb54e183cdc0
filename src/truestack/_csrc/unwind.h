/* --native: the interrupted thread's C call chain, unwound in the SIGPROF
 * handler with libunwind's local unwinder (when built with it: TS_HAVE_LIBUNWIND)
 * and stored as raw return addresses; symbolized later, at drain time.
 */
#ifndef TS_UNWIND_H
#define TS_UNWIND_H
#include "ts_common.h"

/* Why a sample has no (or an incomplete) native stack: exported to Python as
 * _native.NATIVE_REASONS, in this order. */
enum {
    TS_NATIVE_OK = 0,
    TS_NATIVE_OFF = 1,         /* --native not asked for */
    TS_NATIVE_LOADER = 2,      /* the dynamic loader was changing its module list (or was running) */
    TS_NATIVE_FAULT = 3,       /* the unwinder read unmapped memory (a corrupt or torn stack) */
    TS_NATIVE_FAILED = 4,      /* libunwind could not start or found no unwind info */
    TS_NATIVE_TRUNCATED = 5,   /* more frames than kept */
    TS_NATIVE_NOT_RUNNING = 6, /* wall mode: a blocked thread walked by the control thread */
    TS_NATIVE_BUSY = 7,        /* libunwind was in use by another thread's handler (unwind.c) */
    TS_NNATIVE_REASONS = 8
};
extern const char *const ts_native_reason_names[TS_NNATIVE_REASONS];

/* Largest number of return addresses kept per sample. */
#define TS_MAX_NATIVE 1024

/* 1 if this build can unwind native stacks. */
extern const int ts_native_available;

/* GIL held, before sampling starts: initialises libunwind outside any
 * handler (its first use allocates), resolves the functions the handler
 * calls and finds the loader's text. 0 or -errno (-ENOTSUP without libunwind). */
int ts_native_prepare(void);

TS_HIDDEN_BEGIN
/* Unwinds from the signal context uc into ips (leaf first, at most max);
 * returns the count and sets *why. */
TS_SIGNAL_SAFE int ts_native_unwind(void *uc, uint64_t *ips, int max, int *why);
TS_HIDDEN_END
#endif
