/* Fault-tolerant loads: a one-instruction load whose faults our SIGSEGV and
 * SIGBUS handlers recognise by the faulting instruction pointer. */
#include "safeload.h"
#include <signal.h>
#include <string.h>
#include <ucontext.h>

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

static struct sigaction old_segv, old_bus;
static int installed;

TS_SIGNAL_SAFE static void on_fault(int sig, siginfo_t *si, void *ucv) {
#if TS_HAVE_SAFE_LOAD
    ucontext_t *uc = (ucontext_t *)ucv;
    if (uc->uc_mcontext.gregs[REG_RIP] == (greg_t)(uintptr_t)ts_safe_load_insn) {
        uc->uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)ts_safe_load_fixup;
        atomic_fetch_add_explicit(&ts_faults_absorbed, 1, memory_order_relaxed);
        return;
    }
#endif
    /* Not ours: hand the fault to whoever handled it before us. Reinstalling
     * their action and returning re-executes the faulting instruction under
     * it, with exactly their semantics (faulthandler, default core dump). */
    struct sigaction *old = sig == SIGBUS ? &old_bus : &old_segv;
    sigaction(sig, old, NULL);
    (void)si;
}

int ts_safeload_install(void) {
    /* Called at every start: if someone (faulthandler) replaced our handler
     * since, install again on top of theirs and chain to them. */
    struct sigaction cur;
    if (installed && sigaction(SIGSEGV, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction == on_fault && sigaction(SIGBUS, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction == on_fault)
        return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &old_segv) != 0) return -1;
    if (sigaction(SIGBUS, &sa, &old_bus) != 0) return -1;
    installed = 1;
    return 0;
}
