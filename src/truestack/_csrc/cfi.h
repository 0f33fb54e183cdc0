/* --native's fast path: unwinding from the modules' own .eh_frame call-frame
 * information (CFI), read in the handler without a syscall or a lock.
 *
 * libunwind (unwind.c) stays the reference and the fallback: a sample the fast
 * path cannot finish exactly (an unknown address, a CFI rule it does not
 * model, a signal frame, a fault) is unwound again by libunwind from the
 * start. See cfi.c for what is modelled and why.
 */
#ifndef TS_CFI_H
#define TS_CFI_H
#include "ts_common.h"

/* GIL held, no handler running the fast path (start, after quiesce): takes a
 * snapshot of the loaded modules' unwind tables. 0 or -errno. */
int ts_cfi_prepare(void);

/* GIL held (each drain): if a handler found the module list changed since the
 * snapshot, takes a new one. Old snapshots stay readable until the next start. */
void ts_cfi_refresh(void);

/* Samples unwound by the fast path, and samples libunwind unwound (not those
 * declined as "loader" or "busy", or cut short by a fault). */
extern _Atomic uint64_t ts_cfi_unwound, ts_cfi_fallbacks;
/* 0: every sample goes to libunwind (_native.native_unwinder("libunwind"), for comparisons). */
extern atomic_int ts_cfi_enabled;
/* Snapshots taken since the module was loaded. */
extern uint64_t ts_cfi_snapshots;

#ifdef TS_TEST_HOOKS
/* Test builds: while ts_cfi_check is set, every fast-path sample is unwound by
 * libunwind too (unwind.c) and compared: samples checked, samples that
 * differed, and the first difference (fast count, libunwind's count, index
 * where they part, fast address, libunwind's address there). */
#define TS_CFI_CHECK_DEPTH 128
extern atomic_int ts_cfi_check;
extern _Atomic uint64_t ts_cfi_checked, ts_cfi_mismatched;
extern uint64_t ts_cfi_first_mismatch[5];
#endif

TS_HIDDEN_BEGIN
/* Unwinds the signal context uc into ips (leaf first, at most max) exactly as
 * libunwind would: returns the count and sets *why (TS_NATIVE_OK or
 * TS_NATIVE_TRUNCATED), or -1 when libunwind must do it. *seen: the frames
 * stored in ips either way. Must run inside unwind.c's fault escape: it reads
 * modules' CFI with plain loads. */
TS_SIGNAL_SAFE int ts_cfi_unwind(void *uc, uint64_t *ips, int max, int *why, int *seen);
TS_HIDDEN_END
#endif
