/* Fault-tolerant loads: a one-instruction load whose faults our SIGSEGV and
 * SIGBUS handlers recognise by the faulting instruction pointer. */
#include "safeload.h"
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <stdlib.h>
#include <ucontext.h>
#include <unistd.h>

_Atomic uint64_t ts_faults_absorbed;

#if defined(__x86_64__)
/* rdi = address, rsi = int *fault. Faults at ts_safe_load_insn resume at
 * ts_safe_load_fixup, which reports the fault and returns 0. */
__asm__(".text\n"
        ".globl ts_safe_load_asm\n.hidden ts_safe_load_asm\n"
        ".type ts_safe_load_asm,@function\n"
        "ts_safe_load_asm:\n"
        ".globl ts_safe_load_insn\n.hidden ts_safe_load_insn\n"
        "ts_safe_load_insn:\n"
        "    movq (%rdi), %rax\n"
        "    ret\n"
        ".globl ts_safe_load_fixup\n.hidden ts_safe_load_fixup\n"
        "ts_safe_load_fixup:\n"
        "    movl $1, (%rsi)\n"
        "    xorl %eax, %eax\n"
        "    ret\n"
        ".size ts_safe_load_asm, .-ts_safe_load_asm\n");
extern char ts_safe_load_insn[], ts_safe_load_fixup[];
#endif

/* The handlers that were installed before ours, one per signal; never ours.
 * Double-buffered: a re-install (possibly from a signal handler, see
 * ts_safeload_ensure) fills the slot not in use, then publishes it, so a
 * fault being forwarded meanwhile reads a whole sigaction. */
static struct sigaction old_segv[2], old_bus[2];
static _Atomic int old_idx;
static _Atomic int installing; /* one installer at a time; the others skip */
_Atomic uint64_t ts_handler_reinstalls;

/* Set while this thread forwards a fault that is not ours: if the same fault
 * comes back (the previous handler returned, or re-raised it), it gets the
 * default action instead of a second forward, so it is reported exactly once.
 * initial-exec TLS: no allocation on first touch inside a handler. */
static __thread int forwarding __attribute__((tls_model("initial-exec")));
__thread int ts_loading __attribute__((tls_model("initial-exec")));
__thread void *ts_unwind_escape __attribute__((tls_model("initial-exec")));
/* Sent SIGSEGVs let through in a row while this thread sat in one load. */
static __thread int bounced __attribute__((tls_model("initial-exec")));

TS_SIGNAL_SAFE static int is_ours(const struct sigaction *sa);

TS_SIGNAL_SAFE static void die_by_default(int sig, const siginfo_t *si) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    /* A fault re-executes its instruction on return and dies of the default
     * action; a sent signal (kill, raise) must be sent again to do so. */
    if (si->si_code <= 0) raise(sig);
}

TS_SIGNAL_SAFE static void on_fault(int sig, siginfo_t *si, void *ucv) {
#if TS_HAVE_SAFE_LOAD
    ucontext_t *uc = (ucontext_t *)ucv;
    if (uc->uc_mcontext.gregs[REG_RIP] == (greg_t)(uintptr_t)ts_safe_load_insn) {
        uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)ts_safe_load_fixup;
        atomic_fetch_add_explicit(&ts_faults_absorbed, 1, memory_order_relaxed);
        bounced = 0;
        return;
    }
    if (ts_unwind_escape && si->si_code > 0) { /* a real fault inside the native unwinder */
        atomic_fetch_add_explicit(&ts_faults_absorbed, 1, memory_order_relaxed);
        siglongjmp(*(sigjmp_buf *)ts_unwind_escape, 1);
    }
    /* A SIGSEGV this thread sent itself while it sits in a guarded load is
     * that load's fault coming back: another handler (faulthandler, enabled
     * between our check and the load) caught it first, put back the handler
     * it had replaced (ours) and re-raised it. Returning lets the load run
     * again and fault into ours. Bounded, in case that handler did not put
     * ours back. */
    if (ts_loading && si->si_code == SI_TKILL && si->si_pid == getpid() && bounced < 3) {
        bounced++;
        return;
    }
#endif
    /* Not ours: the handler installed before us gets it, once. */
    int idx = atomic_load_explicit(&old_idx, memory_order_acquire);
    const struct sigaction *old = sig == SIGBUS ? &old_bus[idx] : &old_segv[idx];
    if (forwarding) {
        die_by_default(sig, si);
        return;
    }
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction && !is_ours(old)) {
        forwarding = 1;
        old->sa_sigaction(sig, si, ucv);
    } else if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        forwarding = 1;
        old->sa_handler(sig);
    } else if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler == SIG_IGN && si->si_code <= 0) {
        return; /* an ignored signal someone sent: ignored, as without us */
    } else {
        die_by_default(sig, si); /* no handler before us: what the kernel would have done */
        return;
    }
    /* A sent signal the previous handler survived is over; a fault that
     * returns re-executes and comes back here with `forwarding` still set. */
    if (si->si_code <= 0) forwarding = 0;
}

TS_SIGNAL_SAFE static int is_ours(const struct sigaction *sa) {
    return (sa->sa_flags & SA_SIGINFO) && sa->sa_sigaction == on_fault;
}

TS_SIGNAL_SAFE int ts_safeload_guarded(void) {
    struct sigaction cur;
    return sigaction(SIGSEGV, NULL, &cur) == 0 && is_ours(&cur);
}

/* Puts ours on top of sig's handler; *saved gets what we chain to now
 * (unchanged from *current when ours is still installed). */
TS_SIGNAL_SAFE static int install_one(int sig, struct sigaction *saved, const struct sigaction *current) {
    struct sigaction cur, sa;
    if (sigaction(sig, NULL, &cur) != 0) return -1;
    if (is_ours(&cur)) { /* still ours: keep what we chain to */
        *saved = *current;
        return 0;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, &cur) != 0) return -1;
    *saved = cur; /* someone replaced ours since (faulthandler): chain to them now */
    return 1;
}

/* Installs ours on top of whatever SIGSEGV/SIGBUS handlers are there now.
 * -1: failed; 0: another thread is installing right now; 1: done. */
TS_SIGNAL_SAFE static int reinstall(void) {
    if (atomic_exchange_explicit(&installing, 1, memory_order_acquire)) return 0;
    int cur = atomic_load_explicit(&old_idx, memory_order_relaxed), next = 1 - cur;
    int a = install_one(SIGSEGV, &old_segv[next], &old_segv[cur]);
    int b = a < 0 ? -1 : install_one(SIGBUS, &old_bus[next], &old_bus[cur]);
    atomic_store_explicit(&old_idx, next, memory_order_release);
    atomic_store_explicit(&installing, 0, memory_order_release);
    if (a > 0 || b > 0) atomic_fetch_add_explicit(&ts_handler_reinstalls, 1, memory_order_relaxed);
    return a < 0 || b < 0 ? -1 : 1;
}

TS_SIGNAL_SAFE int ts_safeload_ensure(void) {
    /* faulthandler.enable() (pytest calls it for every run) or another tool
     * replaced ours: sigaction() is async-signal-safe, so put ours back on
     * top right here rather than leave samples unwalked until the next drain. */
    if (ts_safeload_guarded()) return 1;
    for (int spins = 0; spins < 4096; spins++) {
        int rc = reinstall();
        if (rc != 0) return rc > 0 && ts_safeload_guarded();
            /* Another thread is installing it (its handler or a drain): a few
         * sigaction calls, unless that thread was preempted. Bounded. */
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
        if (ts_safeload_guarded()) return 1;
    }
    return 0;
}

int ts_safeload_install(void) {
    /* Called at every start and every drain. Our own handler is never saved
     * as the one to chain to. */
    for (int i = 0; i < 1000; i++) {
        int rc = reinstall();
        if (rc != 0) return rc > 0 ? 0 : -1;
        sched_yield(); /* a handler on another thread is installing: it is quick */
    }
    return ts_safeload_guarded() ? 0 : -1;
}
