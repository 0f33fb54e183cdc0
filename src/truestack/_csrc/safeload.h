/* Fault-tolerant memory loads for the signal-time walker.
 *
 * ts_load() reads one aligned machine word; if the address is unmapped the
 * SIGSEGV/SIGBUS handler installed by ts_safeload_install() skips the load
 * and sets *fault instead of killing the process. Faults anywhere else are
 * handed to the handler that was installed before ours.
 */
#ifndef TS_SAFELOAD_H
#define TS_SAFELOAD_H
#include "ts_common.h"

#if defined(__x86_64__)
#define TS_HAVE_SAFE_LOAD 1
/* The one-instruction load (safeload.c); faults resume at its fixup. */
/* Hidden: called directly, not through the PLT. */
__attribute__((visibility("hidden"))) uint64_t ts_safe_load_asm(uintptr_t addr, int *fault);
#else
#define TS_HAVE_SAFE_LOAD 0
#endif

#if defined(TS_REMOTE_LOADS)
/* The dump build (truestack._remote, remote.c) compiles the same walker
 * against this load: it reads another process with process_vm_readv. */
uint64_t ts_remote_load(uintptr_t addr, int *fault);
#endif

/* Non-zero while this thread is inside a guarded load (see on_fault in
 * safeload.c). initial-exec TLS: a plain %fs-relative access, no allocation. */
extern __thread int ts_loading __attribute__((tls_model("initial-exec")));

/* Non-NULL while this thread's SIGPROF handler runs the native unwinder
 * (unwind.c): a fault anywhere in it (a corrupt stack read through) jumps
 * back there instead of killing the process. */
extern __thread void *ts_unwind_escape __attribute__((tls_model("initial-exec")));

/* Returns the 8-byte word at addr, or 0 with *fault = 1 when addr is
 * misaligned, in the first page, non-canonical, or unmapped. Once *fault
 * is set every further load returns 0, so callers check once at the end. */
TS_SIGNAL_SAFE static inline uint64_t ts_load(uintptr_t addr, int *fault) {
    if (*fault) return 0;
    if ((addr & 7) || addr < 4096 || addr > 0x00007fffffffffffULL) {
        *fault = 1;
        return 0;
    }
#if defined(TS_REMOTE_LOADS)
    return ts_remote_load(addr, fault);
#elif TS_HAVE_SAFE_LOAD
    ts_loading++;
    uint64_t word = ts_safe_load_asm(addr, fault);
    ts_loading--;
    return word;
#else
    /* No fault-tolerant load on this architecture: plausibility checks only. */
    return *(volatile uint64_t *)addr;
#endif
}

/* Loads a narrower field (size 1, 2 or 4, naturally aligned). */
TS_SIGNAL_SAFE static inline uint64_t ts_load_sized(uintptr_t addr, int size, int *fault) {
    uintptr_t base = addr & ~(uintptr_t)7;
    uint64_t word = ts_load(base, fault) >> ((unsigned)(addr - base) * 8);
    return size >= 8 ? word : word & ((1ULL << (size * 8)) - 1);
}

/* Installs the SIGSEGV/SIGBUS handlers, or again on top of whoever replaced
 * them since (GIL held; start and every drain call it). */
int ts_safeload_install(void);
/* Is our SIGSEGV handler the one installed? A walk without it is unguarded. */
TS_SIGNAL_SAFE int ts_safeload_guarded(void);
/* Ours, installed again on top if someone replaced it; 0 if it could not be. */
TS_SIGNAL_SAFE int ts_safeload_ensure(void);
/* How many times ours had been replaced and was put back (statistics). */
extern _Atomic uint64_t ts_handler_reinstalls;
/* How many faults the loads absorbed (statistics). */
extern _Atomic uint64_t ts_faults_absorbed;
#endif
