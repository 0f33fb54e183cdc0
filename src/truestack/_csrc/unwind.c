/* --native (see unwind.h): libunwind's local unwinder, run in the handler.
 *
 * Why libunwind and not frame pointers: the pyenv CPython builds (and most
 * distributions' before 3.12 with -fno-omit-frame-pointer) are compiled
 * without frame pointers, so a frame-pointer walk loses the interpreter's
 * frames. libunwind documents unw_init_local2(UNW_INIT_SIGNAL_FRAME) and
 * unw_step as async-signal-safe, with three caveats handled here:
 *
 * - Unwind info is found through dl_iterate_phdr (Gfind_proc_info-lsb.c,
 *   with signals masked around it), which reads the loader's module list.
 *   glibc publishes _r_debug.r_state = RT_ADD / RT_DELETE (the debugger
 *   protocol) before dlopen/dlclose link or unlink a module, and
 *   RT_CONSISTENT after: while it is not consistent the sample keeps only
 *   its Python frames (reason "loader"). The lock dl_iterate_phdr takes
 *   (dl_load_write_lock) is recursive, so a thread interrupted while holding
 *   it re-enters it, and other threads hold it only for short list walks.
 *   Code merely running in ld.so (__tls_get_addr, lazy binding) is unwound:
 *   it has CFI, and skipping it lost a third of the samples of a ctypes
 *   callback loop.
 * - Its register-state cache (UNW_CACHE_GLOBAL, the default) is a lock taken
 *   with every signal blocked, so the interrupted thread never holds it; the
 *   per-thread policy would need libunwind's dynamic TLS, which may allocate
 *   on first touch in a dlopen'ed library: not used.
 * - A corrupt stack: libunwind built with conservative checks (its default,
 *   and Debian's 1.6.2) validates every address a step reads (mincore or
 *   msync, a 4-entry cache of good pages) and stops there. Without them, or
 *   if a page goes away between check and read, the read faults:
 *   safeload.c's SIGSEGV handler then jumps back here (ts_unwind_escape) and
 *   the stack read so far is kept. _native._probe_native_fault (test builds)
 *   unwinds a context whose stack is unmapped.
 *
 * libunwind's first use allocates (tdep_init): ts_native_prepare() unwinds
 * once outside any handler, which also binds the lazily bound PLT entries.
 */
#include "unwind.h"
#include "cfi.h"
#include "safeload.h"
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <setjmp.h>
#include <string.h>

const char *const ts_native_reason_names[TS_NNATIVE_REASONS] = {
    NULL, "off", "loader", "fault", "failed", "truncated", "not_running", "busy",
};

#ifdef TS_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <ucontext.h>

const int ts_native_available = 1;
TS_SIGNAL_SAFE static void walk_libunwind(ucontext_t *uc, uint64_t *ips, int max, int *why, volatile int *n);
static void find_loader_code(void);

int ts_native_prepare(void) {
    static int done;
    int rc = ts_cfi_prepare(); /* the fast path's module tables */
    if (rc) return rc;
    if (done) return 0;
    /* First use, outside any handler: tdep_init, caches, PLT bindings; both paths. */
    ucontext_t uc;
    unw_cursor_t c;
    if (getcontext(&uc) != 0) return -errno;
    uint64_t ips[8];
    int why;
    volatile int n = 0;
    walk_libunwind(&uc, ips, 8, &why, &n);
    int seen;
    (void)ts_cfi_unwind(&uc, ips, 8, &why, &seen);
    find_loader_code();
    if (unw_init_local2(&c, (unw_context_t *)&uc, UNW_INIT_SIGNAL_FRAME) < 0) return -ENOTSUP;
    done = 1;
    return 0;
}

TS_SIGNAL_SAFE static int loader_busy(void) { return *(volatile int *)&_r_debug.r_state != RT_CONSISTENT; }

/* The loader's code: ld.so's text, and dl_iterate_phdr (libc). A thread
 * interrupted there may be taking or letting go of the loader's recursive
 * lock (dl_load_write_lock): between the futex and its owner field the lock
 * is neither free nor known to be this thread's, and libunwind, calling
 * dl_iterate_phdr from the handler, would wait for it forever. It did: a
 * handler interrupted _dl_add_to_namespace_list inside pthread_mutex_lock.
 * So a sample whose first frames are there is never given to libunwind. */
static uintptr_t loader_code[2][2];

static int find_ldso_text(struct dl_phdr_info *info, size_t size, void *base) {
    (void)size;
    if (info->dlpi_addr != (uintptr_t)base) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
            loader_code[0][0] = info->dlpi_addr + ph->p_vaddr;
            loader_code[0][1] = loader_code[0][0] + ph->p_memsz;
        }
    }
    return 1;
}

static void find_loader_code(void) {
    Dl_info di;
    const ElfW(Sym) *sym = NULL;
    if (dladdr((void *)&_r_debug, &di)) dl_iterate_phdr(find_ldso_text, di.dli_fbase);
    if (dladdr1((void *)dl_iterate_phdr, &di, (void **)&sym, RTLD_DL_SYMENT) && sym && di.dli_saddr) {
        loader_code[1][0] = (uintptr_t)di.dli_saddr;
        loader_code[1][1] = loader_code[1][0] + (sym->st_size ? sym->st_size : 1024);
    }
}

TS_SIGNAL_SAFE static int in_loader_code(const uint64_t *ips, int n) {
    for (int i = 0; i < n && i < 3; i++)
        for (int k = 0; k < 2; k++)
            if (ips[i] >= loader_code[k][0] && ips[i] < loader_code[k][1]) return 1;
    return 0;
}

/* libunwind's walk from uc; *n counts the frames stored so far (read after a
 * fault jumps back to the escape). */
TS_SIGNAL_SAFE static void walk_libunwind(ucontext_t *uc, uint64_t *ips, int max, int *why, volatile int *n) {
    unw_cursor_t c;
    if (unw_init_local2(&c, (unw_context_t *)uc, UNW_INIT_SIGNAL_FRAME) < 0) {
        *why = TS_NATIVE_FAILED;
        return;
    }
    for (;;) {
        unw_word_t ip = 0;
        if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || !ip) break;
        if (*n == max) {
            *why = TS_NATIVE_TRUNCATED;
            break;
        }
        ips[*n] = ip;
        *n = *n + 1;
        int rc = unw_step(&c);
        if (rc <= 0) {
            if (rc < 0) *why = TS_NATIVE_FAILED; /* the rest has no unwind info */
            break;
        }
    }
}

/* One handler at a time in libunwind. libunwind holds its cache lock while it
 * calls dl_iterate_phdr, which takes the loader's write lock; a thread inside
 * dlopen holds that lock at moments when _r_debug still reads consistent
 * (seen in _dl_add_to_namespace_list, glibc 2.36). If its handler then waited
 * for libunwind's cache lock, held by another thread's handler that waits for
 * the loader's lock, both would hang: they did, in tests/native/test_cfi_unwind.py.
 * A handler that finds libunwind taken does not wait: its sample keeps its
 * Python frames ("busy"). *holding stays set while the flag is ours, for
 * the fault escape to let go of it. */
static atomic_flag libunwind_taken = ATOMIC_FLAG_INIT;

TS_SIGNAL_SAFE static int walk_libunwind_alone(ucontext_t *uc, uint64_t *ips, int max, int *why, volatile int *n,
                                               volatile int *holding) {
    if (atomic_flag_test_and_set_explicit(&libunwind_taken, memory_order_acquire)) return 0;
    *holding = 1;
    walk_libunwind(uc, ips, max, why, n);
    *holding = 0;
    atomic_flag_clear_explicit(&libunwind_taken, memory_order_release);
    return 1;
}

#ifdef TS_TEST_HOOKS
atomic_int ts_cfi_check;
_Atomic uint64_t ts_cfi_checked, ts_cfi_mismatched;
uint64_t ts_cfi_first_mismatch[5];

/* Test builds, when asked: libunwind unwinds the sample the fast path did,
 * and any difference is counted (the first one kept: both counts, where they
 * part, and the two addresses there). */
TS_SIGNAL_SAFE static void check_fast_path(ucontext_t *uc, const uint64_t *ips, int n, int why, volatile int *holding) {
    uint64_t theirs[TS_CFI_CHECK_DEPTH];
    volatile int m = 0;
    int their_why = TS_NATIVE_OK;
    if (n > TS_CFI_CHECK_DEPTH || in_loader_code(ips, n) ||
        !walk_libunwind_alone(uc, theirs, TS_CFI_CHECK_DEPTH, &their_why, &m, holding))
        return;
    int at = 0;
    while (at < n && at < m && ips[at] == theirs[at]) at++;
    atomic_fetch_add(&ts_cfi_checked, 1);
    if (at == n && at == m && why == their_why) return;
    if (atomic_fetch_add(&ts_cfi_mismatched, 1) == 0) {
        uint64_t *f = ts_cfi_first_mismatch;
        f[0] = (uint64_t)n, f[1] = (uint64_t)m, f[2] = (uint64_t)at;
        f[3] = at < n ? ips[at] : 0, f[4] = at < m ? theirs[at] : 0;
    }
}
#endif

TS_SIGNAL_SAFE int ts_native_unwind(void *ucv, uint64_t *ips, int max, int *why) {
    ucontext_t *uc = (ucontext_t *)ucv;
    *why = TS_NATIVE_OK;
    if (loader_busy()) {
        *why = TS_NATIVE_LOADER;
        return 0;
    }
    /* volatile: read after a fault jumps back here */
    volatile int n = 0, holding = 0;
    sigjmp_buf escape;
    if (sigsetjmp(escape, 0)) { /* a fault in the unwinder (safeload.c) */
        ts_unwind_escape = NULL;
        if (holding) atomic_flag_clear_explicit(&libunwind_taken, memory_order_release);
        *why = TS_NATIVE_FAULT;
        return n;
    }
    ts_unwind_escape = &escape;
    int seen = 0;
    int fast = ts_cfi_unwind(uc, ips, max, why, &seen);
    if (fast >= 0) {
        n = fast;
        atomic_fetch_add_explicit(&ts_cfi_unwound, 1, memory_order_relaxed);
#ifdef TS_TEST_HOOKS
        if (atomic_load_explicit(&ts_cfi_check, memory_order_relaxed)) check_fast_path(uc, ips, fast, *why, &holding);
#endif
    } else {
        *why = TS_NATIVE_OK;
        if (in_loader_code(ips, seen))
            *why = TS_NATIVE_LOADER;
        else if (!walk_libunwind_alone(uc, ips, max, why, &n, &holding))
            *why = TS_NATIVE_BUSY;
        else /* counted once libunwind really took the sample (a fault jumps past: reason "fault") */
            atomic_fetch_add_explicit(&ts_cfi_fallbacks, 1, memory_order_relaxed);
    }
    ts_unwind_escape = NULL;
    return n;
}
#else
const int ts_native_available = 0;
int ts_native_prepare(void) { return -ENOTSUP; }
TS_SIGNAL_SAFE int ts_native_unwind(void *uc, uint64_t *ips, int max, int *why) {
    (void)uc, (void)ips, (void)max;
    *why = TS_NATIVE_FAILED;
    return 0;
}
#endif
