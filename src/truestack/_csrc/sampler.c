/* Sampling core (see sampler.h): the thread registry and the SIGPROF handler.
 *
 * Signals: everything arrives as SIGPROF. Ours are recognised by their
 * origin (SI_TIMER with our cookie, perf's POLL_* fasync codes, SI_QUEUE
 * with our cookie from the control thread); anything else is chained to the
 * handler that was installed before ours. The handler stays installed for
 * the life of the process: a timer signal arriving after stop() finds the
 * sampler inactive and returns. Every handler run is counted in `in_flight`
 * so stop() can wait until none is left before anything is unmapped.
 *
 * Threads are armed only once proven alive and ours (tgkill with signal 0
 * checks the tid belongs to this thread group): a registration left by a
 * thread that died may name a tid the kernel gave to another process.
 *
 * fork(): the child stops sampling cleanly. Timers and the control thread
 * do not survive fork, inherited perf fds are closed, and the inherited ring
 * contents (the parent's samples) are discarded; Python code in the child
 * sees ts_forked_child and may start a new session.
 */
#include "sampler_int.h"
#include "ring.h"
#include "safeload.h"
#include "unwind.h"
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

ts_counters ts_C;
int ts_forked_child;
_Atomic int64_t ts_interval_ns;
int64_t ts_requested_interval_ns;
int ts_mode;
ts_thread ts_threads[TS_MAX_THREADS];
_Atomic int ts_threads_hwm;
pthread_mutex_t ts_reg_lock = PTHREAD_MUTEX_INITIALIZER;
_Atomic int ts_active;
int ts_timer_kind;
int ts_max_frames;
int ts_max_native; /* --native: return addresses kept per sample; 0 = off */
pid_t ts_pid;
static _Atomic int in_flight;   /* handler runs in progress, on any thread */
static _Atomic int calibrating; /* our signals are only being timed: return at once */
int64_t ts_delivery_ns;
static struct sigaction old_prof;

const char *ts_timer_name(int t) {
    switch (t) {
    case TS_TIMER_PERF: return "perf_event task-clock";
    case TS_TIMER_POSIX: return "timer_create CPU clock";
    case TS_TIMER_THREAD: return "control thread (rt_tgsigqueueinfo)";
    default: return "none";
    }
}

TS_SIGNAL_SAFE int64_t ts_now_ns(clockid_t clk) {
    struct timespec ts;
    if (clock_gettime(clk, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

siginfo_t ts_own_siginfo(void) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_signo = SIGPROF;
    info.si_code = SI_QUEUE;
    info.si_pid = ts_pid;
    info.si_uid = getuid();
    info.si_value.sival_ptr = TS_COOKIE;
    return info;
}

int ts_tid_is_ours(int tid) { return tid > 0 && syscall(SYS_tgkill, ts_pid, tid, 0) == 0; }

TS_SIGNAL_SAFE static ts_thread *find_thread(int tid) {
    int n = atomic_load_explicit(&ts_threads_hwm, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (atomic_load_explicit(&ts_threads[i].tid, memory_order_relaxed) == tid) return &ts_threads[i];
    return NULL;
}

TS_SIGNAL_SAFE static int is_ours(const siginfo_t *si) {
    if (si->si_code == SI_TIMER) return si->si_value.sival_ptr == TS_COOKIE;
    if (si->si_code == SI_QUEUE) return si->si_value.sival_ptr == TS_COOKIE && si->si_pid == ts_pid;
    if (si->si_code >= POLL_IN && si->si_code <= POLL_HUP) return ts_timer_kind == TS_TIMER_PERF;
    return 0;
}

TS_SIGNAL_SAFE static void chain_prof(int sig, siginfo_t *si, void *uc) {
    if (old_prof.sa_flags & SA_SIGINFO) {
        if (old_prof.sa_sigaction) old_prof.sa_sigaction(sig, si, uc);
    } else if (old_prof.sa_handler != SIG_DFL && old_prof.sa_handler != SIG_IGN) {
        old_prof.sa_handler(sig);
    }
    /* SIG_DFL would terminate the process: a stray SIGPROF is dropped instead. */
}

/* What a sample of thread t stands for, from its CPU clock now (cpu). */
typedef struct {
    int64_t weight, delta;
    int state, overrun;
    int stale; /* wall: its time went to a remote walk since the signal was sent */
} ts_account;

TS_SIGNAL_SAFE static ts_account account(ts_thread *t, int64_t cpu, int overrun, int remote) {
    ts_account a = {0, -1, TS_STATE_UNKNOWN, overrun, 0};
    int64_t interval = atomic_load_explicit(&ts_interval_ns, memory_order_relaxed);
    if (t) {
        int64_t last = atomic_exchange_explicit(&t->last_cpu_ns, cpu, memory_order_relaxed);
        int had = atomic_exchange_explicit(&t->sampled, 1, memory_order_relaxed);
        if (last >= 0 && (had || ts_mode == TS_MODE_CPU)) a.delta = cpu - last;
    }
    if (ts_mode == TS_MODE_CPU) {
        /* The thread's own CPU clock since its previous sample is exact CPU
         * time, whatever the timer's granularity or coalesced signals. */
        a.weight = a.delta > 0 ? a.delta : interval * (1 + (int64_t)overrun);
        a.state = TS_STATE_RUNNING;
        return a;
    }
    a.weight = interval;
    if (t) {
        uint64_t sent = atomic_load_explicit(&t->sent_ns, memory_order_relaxed);
        uint64_t seen = atomic_exchange_explicit(&t->seen_ns, sent, memory_order_relaxed);
        if (sent > seen)
            a.weight = (int64_t)(sent - seen);
        else if (!remote)
            /* Sent while the thread ran, delivered only after it stopped
             * running long enough for a remote walk to account its time:
             * the signal stands for nothing left (a loaded machine defers
             * delivery to a descheduled thread). */
            a.stale = 1;
        if (a.weight > interval) a.overrun = (int)(a.weight / interval - 1);
    }
    if (remote)
        a.state = TS_STATE_IDLE; /* walked because it did not run */
    else if (a.delta >= 0)
        a.state = a.delta * 2 >= interval ? TS_STATE_RUNNING : TS_STATE_IDLE;
    return a;
}

TS_SIGNAL_SAFE static void fill(ts_slot *s, int tid, const ts_account *a, const ts_walk_result *r, int64_t now) {
    s->tid = tid;
    s->nframes = (uint16_t)r->nframes;
    s->state = (uint8_t)a->state;
    s->partial = (uint8_t)r->partial;
    s->depth = (uint32_t)r->depth;
    s->overrun = (uint32_t)a->overrun;
    s->time_ns = now;
    s->weight_ns = a->weight;
    s->cpu_delta_ns = a->delta > 0 ? a->delta : 0;
    s->coro = (uint64_t)r->coro;
    s->nnative = 0;
    s->nsegs = 0;
    s->native_why = TS_NATIVE_OFF;
}

/* --native: the C call chain at the interrupted instruction, and where the
 * eval loop's C calls begin and end among the Python frames. */
TS_SIGNAL_SAFE static void take_native(ts_slot *s, void *uc, const ts_segs *segs) {
    int why;
    s->nnative = (uint16_t)ts_native_unwind(uc, ts_slot_ips(s), ts_max_native, &why);
    s->native_why = (uint8_t)why;
    s->nsegs = segs->overflow ? 0xff : (uint8_t)segs->n;
}

TS_SIGNAL_SAFE static void commit(ts_slot *s, uint64_t pos, const ts_account *a, int partial) {
    if (a->overrun > 0) atomic_fetch_add_explicit(&ts_C.overruns, (uint64_t)a->overrun, memory_order_relaxed);
    if (!ts_ring_commit(s, pos)) {
        atomic_fetch_add_explicit(&ts_C.dropped, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&ts_C.samples, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ts_C.weight_ns, (uint64_t)a->weight, memory_order_relaxed);
    if (partial) atomic_fetch_add_explicit(&ts_C.partial[partial], 1, memory_order_relaxed);
}

TS_SIGNAL_SAFE static void take_sample(const siginfo_t *si, void *uc, int64_t cpu) {
    int64_t now = ts_now_ns(CLOCK_MONOTONIC);
    int tid = (int)syscall(SYS_gettid);
    ts_account a = account(find_thread(tid), cpu, si->si_code == SI_TIMER ? si->si_overrun : 0, 0);
    if (a.stale) {
        atomic_fetch_add_explicit(&ts_C.stale, 1, memory_order_relaxed);
        return;
    }
    uint64_t pos;
    ts_slot *s = ts_ring_claim(&pos);
    if (!s) {
        atomic_fetch_add_explicit(&ts_C.dropped, 1, memory_order_relaxed);
        return;
    }
    ts_walk_result r = {0, 0, TS_UNGUARDED, NULL, 0};
    ts_segs segs = {ts_max_native ? ts_slot_segs(s) : NULL, TS_MAX_SEGS, 0, 0};
    /* A walk relies on our fault handler: never walk without it. */
    int guarded = ts_safeload_ensure();
    if (guarded) ts_walk_segs(ts_current_tstate(), s->frames, ts_max_frames, &r, ts_max_native ? &segs : NULL);
    fill(s, tid, &a, &r, now);
    if (guarded && ts_max_native) take_native(s, uc, &segs);
    commit(s, pos, &a, r.partial);
}

TS_SIGNAL_SAFE ts_slot *ts_remote_claim(uint64_t *pos) {
    ts_slot *s = ts_ring_claim(pos);
    if (!s) atomic_fetch_add_explicit(&ts_C.dropped, 1, memory_order_relaxed);
    return s;
}

TS_SIGNAL_SAFE void ts_remote_publish(ts_thread *t, int tid, ts_slot *s, uint64_t pos, const ts_walk_result *r,
                                      int64_t cpu_ns, int64_t now_ns, int ran) {
    ts_account a = account(t, cpu_ns, 0, 1);
    if (ran) a.state = TS_STATE_RUNNING;
    fill(s, tid, &a, r, now_ns);
    if (ts_max_native) s->native_why = TS_NATIVE_NOT_RUNNING; /* its C stack is not ours to unwind */
    commit(s, pos, &a, r->partial);
    atomic_fetch_add_explicit(&ts_C.remote_samples, 1, memory_order_relaxed);
}

TS_SIGNAL_SAFE void ts_remote_void(ts_slot *s, uint64_t pos) {
    /* Its frames may be torn (the thread ran during the walk): the consumer
     * must skip the slot before it touches a frame. */
    s->tid = TS_VOID_TID;
    s->nframes = 0;
    ts_ring_commit(s, pos);
}

TS_SIGNAL_SAFE static void on_sigprof(int sig, siginfo_t *si, void *uc) {
    int saved_errno = errno;
    atomic_fetch_add_explicit(&in_flight, 1, memory_order_acq_rel);
    if (!is_ours(si)) {
        atomic_fetch_add_explicit(&ts_C.foreign, 1, memory_order_relaxed);
        chain_prof(sig, si, uc);
    } else if (atomic_load_explicit(&calibrating, memory_order_relaxed)) {
        /* timed by calibrate_delivery() */
    } else if (!atomic_load_explicit(&ts_active, memory_order_acquire)) {
        atomic_fetch_add_explicit(&ts_C.late, 1, memory_order_relaxed);
    } else {
        /* The handler's own CPU time feeds the control thread's budget (CPU
         * time: a thread preempted inside the handler costs nothing meanwhile). */
        int64_t cpu = ts_now_ns(CLOCK_THREAD_CPUTIME_ID);
        atomic_fetch_add_explicit(&ts_C.signals, 1, memory_order_relaxed);
        take_sample(si, uc, cpu);
        atomic_fetch_add_explicit(&ts_C.handler_ns, (uint64_t)(ts_now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu),
                                  memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&in_flight, 1, memory_order_acq_rel);
    errno = saved_errno;
}

/* Waits (bounded) until no handler is running on any thread. */
static void quiesce(void) {
    for (int i = 0; i < 200000 && atomic_load(&in_flight) > 0; i++) {
        struct timespec ts = {0, 5000};
        nanosleep(&ts, NULL);
    }
}

static int install_handler(void) {
    struct sigaction cur;
    if (sigaction(SIGPROF, NULL, &cur) != 0) return -errno;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigprof) return 0;
    /* Resolve lazily bound symbols before a signal can need them. */
    (void)ts_now_ns(CLOCK_MONOTONIC);
    (void)ts_now_ns(CLOCK_THREAD_CPUTIME_ID);
    (void)syscall(SYS_gettid);
    (void)ts_current_tstate();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGPROF);
    if (sigaction(SIGPROF, &sa, &old_prof) != 0) return -errno;
    return 0;
}

/* What one signal costs the interrupted thread on this machine (kernel entry,
 * delivery, sigreturn), measured once with signals sent to ourselves: it
 * differs by kernel and hypervisor, and the CPU budget charges it per sample.
 * A timer's signal also costs an interrupt and the timer's own work, which a
 * self-sent one does not: measured end to end on x86-64 VMs that adds up to
 * ~10 us, the floor used here. */
#define TS_MIN_DELIVERY_NS 10000
static void calibrate_delivery(void) {
    static int done;
    if (done) return;
    siginfo_t info = ts_own_siginfo();
    int self = (int)syscall(SYS_gettid), n = 64;
    atomic_store(&calibrating, 1);
    int64_t best = -1;
    for (int round = 0; round < 3; round++) { /* the least disturbed of three rounds */
        int64_t c0 = ts_now_ns(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 0; i < n; i++) syscall(SYS_rt_tgsigqueueinfo, ts_pid, self, SIGPROF, &info);
        int64_t per = (ts_now_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / n;
        if (best < 0 || per < best) best = per;
    }
    atomic_store(&calibrating, 0);
    ts_delivery_ns = best > TS_MIN_DELIVERY_NS ? best : TS_MIN_DELIVERY_NS;
    done = 1;
}

/* -- registry ----------------------------------------------------------- */

/* Callers hold reg_lock. */
static int register_locked(int tid, void *tstate, unsigned long ident) {
    if (tid <= 0) return -EINVAL;
    ts_thread *t = find_thread(tid);
    if (t) {
        if (tstate) t->tstate = tstate, t->ident = ident;
        return 0;
    }
    if (!ts_tid_is_ours(tid)) return -ESRCH; /* gone, or never ours */
    int n = atomic_load(&ts_threads_hwm), slot = -1;
    for (int i = 0; i < n; i++)
        if (atomic_load(&ts_threads[i].tid) == 0) {
            slot = i;
            break;
        }
    if (slot < 0) {
        if (n >= TS_MAX_THREADS) return -ENOSPC;
        slot = n;
    }
    t = &ts_threads[slot];
    t->perf_fd = -1;
    t->perf_lost = 0;
    t->has_timer = 0;
    t->tstate = tstate;
    t->ident = ident;
    atomic_store(&t->dead, 0);
    atomic_store(&t->unarmed, 0);
    atomic_store(&t->sampled, 0);
    atomic_store(&t->sent_ns, 0);
    atomic_store(&t->seen_ns, 0);
    int64_t cpu = ts_now_ns(ts_thread_cpu_clock(tid));
    atomic_store(&t->last_cpu_ns, cpu);
    t->ctl_cpu_ns = cpu;
    if (cpu < 0) return -ESRCH;
    if (atomic_load(&ts_active)) ts_arm(t, tid); /* failure leaves it registered, unarmed and reported */
    atomic_store_explicit(&t->tid, tid, memory_order_release);
    if (slot == n) atomic_store_explicit(&ts_threads_hwm, n + 1, memory_order_release);
    return 0;
}

/* The thread that arms or disarms the timers must not take their signals meanwhile: at a rate
 * whose delivery costs more CPU than the interval holds (100 kHz on a VM where one perf_event
 * signal costs ~28 us), a thread taking them makes no progress, and before the control thread
 * runs (start) or after it has stopped (stop) nothing lowers the rate: it spun forever. */
static sigset_t block_sigprof(void) {
    sigset_t prof, old;
    sigemptyset(&prof);
    sigaddset(&prof, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &prof, &old);
    return old;
}

static void restore_sigmask(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* ts_reg_lock is taken with SIGPROF blocked, for the same reason: a thread that held it while
 * taking signals at a rate it cannot bear would never let go of it, and the control thread, which
 * needs it to lower that rate, would wait for it forever (`record --rate 100000` hung so, in the
 * engine's first registration of the main thread). */
static sigset_t reg_lock_acquire(void) {
    sigset_t old = block_sigprof();
    pthread_mutex_lock(&ts_reg_lock);
    return old;
}

static void reg_lock_release(const sigset_t *old) {
    pthread_mutex_unlock(&ts_reg_lock);
    restore_sigmask(old);
}

int ts_register_thread(int tid, void *tstate, unsigned long ident) {
    sigset_t mask = reg_lock_acquire();
    int rc = register_locked(tid, tstate, ident);
    reg_lock_release(&mask);
    return rc;
}

int ts_unregister_thread(int tid) {
    sigset_t mask = reg_lock_acquire();
    ts_thread *t = find_thread(tid);
    if (t) {
        ts_disarm(t);
        atomic_store_explicit(&t->tid, 0, memory_order_release);
    }
    reg_lock_release(&mask);
    return t ? 0 : -ENOENT;
}

/* cpu mode: a thread whose perf fd the program closed is armed again, at most
 * once a second: one ioctl per thread. The loss may have been found first by
 * another use of the fd (ts_perf_fd_is_ours: the budget's period change). */
void ts_rearm_lost_timers(void) {
    static int64_t last;
    int64_t now = ts_now_ns(CLOCK_MONOTONIC);
    if (!atomic_load(&ts_active) || now - last < 1000000000LL) return;
    last = now;
    sigset_t mask = reg_lock_acquire();
    int n = atomic_load(&ts_threads_hwm);
    for (int i = 0; i < n; i++) {
        ts_thread *t = &ts_threads[i];
        int tid = atomic_load(&t->tid);
        if (tid && t->perf_fd >= 0) (void)ts_perf_fd_is_ours(t);
        if (tid && t->perf_lost && ts_arm(t, tid) == 0) atomic_fetch_add(&ts_C.timer_fds_rearmed, 1);
    }
    reg_lock_release(&mask);
}

#ifdef TS_TEST_HOOKS
int ts_test_register_stale(int tid) {
    /* A registration as a thread that died long ago would have left it. */
    sigset_t mask = reg_lock_acquire();
    int n = atomic_load(&ts_threads_hwm), rc = -ENOSPC;
    if (n < TS_MAX_THREADS) {
        ts_thread *t = &ts_threads[n];
        memset((void *)t, 0, sizeof *t);
        t->perf_fd = -1;
        atomic_store(&t->tid, tid);
        atomic_store(&ts_threads_hwm, n + 1);
        rc = 0;
    }
    reg_lock_release(&mask);
    return rc;
}

int ts_test_registry_lock_blocks_sigprof(void) {
    sigset_t mask = reg_lock_acquire(), now;
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    reg_lock_release(&mask);
    return sigismember(&now, SIGPROF) == 1;
}

/* As the CPU budget does (control.c); 0 pauses every timer, the next call resumes them. */
void ts_test_change_period(int64_t interval_ns) {
    static int paused;
    sigset_t mask = reg_lock_acquire();
    if (interval_ns == 0 || paused) ts_pause_all(paused = interval_ns == 0);
    if (interval_ns != 0 && interval_ns != atomic_load(&ts_interval_ns)) {
        atomic_store(&ts_interval_ns, interval_ns);
        ts_rearm_all(interval_ns);
    }
    reg_lock_release(&mask);
}
#endif

/* Copies the registered tids (flag: only those never sampled for want of a timer). */
int ts_thread_tids(int *out, int max, int only_unarmed) {
    sigset_t mask = reg_lock_acquire();
    int n = atomic_load(&ts_threads_hwm), c = 0;
    for (int i = 0; i < n && c < max; i++) {
        int tid = atomic_load(&ts_threads[i].tid);
        if (tid && (!only_unarmed || atomic_load(&ts_threads[i].unarmed))) out[c++] = tid;
    }
    reg_lock_release(&mask);
    return c;
}

int ts_thread_count(void) {
    int n = atomic_load(&ts_threads_hwm), c = 0;
    for (int i = 0; i < n; i++) c += atomic_load(&ts_threads[i].tid) != 0;
    return c;
}

/* -- fork -------------------------------------------------------------- */

static sigset_t fork_mask; /* the forking thread's, while it holds ts_reg_lock across fork() */
static void atfork_prepare(void) { fork_mask = reg_lock_acquire(); }
static void atfork_parent(void) { reg_lock_release(&fork_mask); }
static void atfork_child(void) {
    pthread_mutex_init(&ts_reg_lock, NULL);
    restore_sigmask(&fork_mask);
    if (atomic_load(&ts_active)) ts_forked_child = 1;
    atomic_store(&ts_active, 0);
    atomic_store(&in_flight, 0); /* other threads' handlers do not exist here */
    ts_control_after_fork();
    ts_pid = getpid();
    int n = atomic_load(&ts_threads_hwm);
    for (int i = 0; i < n; i++) {
        ts_thread *t = &ts_threads[i];
        if (ts_perf_fd_is_ours(t)) close(t->perf_fd); /* counts the parent's thread */
        t->perf_fd = -1;
        t->has_timer = 0; /* POSIX timers are not inherited */
        atomic_store(&t->tid, 0);
    }
    atomic_store(&ts_threads_hwm, 0);
    /* Undrained samples belong to the parent, which reports them. */
    ts_ring_reset_after_fork();
}

/* -- lifecycle ---------------------------------------------------------- */

int ts_sampler_active(void) { return atomic_load(&ts_active); }
int ts_sampler_timer(void) { return ts_timer_kind; }

int ts_sampler_start(int mode, int64_t interval_ns, int frames, int native, uint64_t ring_slots, int timer_pref) {
    static int atfork_done;
    if (atomic_load(&ts_active)) return -EBUSY;
    if (!TS_HAVE_SAFE_LOAD) return -ENOTSUP; /* never walk unguarded */
    if (!atfork_done) {
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        atfork_done = 1;
    }
    ts_pid = getpid();
    ts_forked_child = 0;
    quiesce(); /* a late handler of the previous session may still read the ring */
    if (ts_safeload_install() != 0) return -errno;
    if (native > 0) {
        int rc = ts_native_prepare();
        if (rc) return rc;
    }
    if (ts_ring_init(ring_slots, frames, native) != 0) return -ENOMEM;
    ts_max_frames = frames;
    ts_max_native = native;
    ts_mode = mode;
    ts_requested_interval_ns = interval_ns;
    atomic_store(&ts_interval_ns, interval_ns);
    int rc = install_handler();
    if (rc) return rc;
    calibrate_delivery();
    if (mode == TS_MODE_CPU) {
        rc = ts_timers_probe(interval_ns, timer_pref);
        if (rc) return rc;
    } else {
        ts_timer_kind = TS_TIMER_THREAD;
    }
    sigset_t mask = block_sigprof(); /* after calibrate_delivery(), which needs its signals */
    pthread_mutex_lock(&ts_reg_lock);
    atomic_store(&ts_active, 1);
    int n = atomic_load(&ts_threads_hwm);
    for (int i = 0; i < n; i++) {
        ts_thread *t = &ts_threads[i];
        int tid = atomic_load(&t->tid);
        if (!tid) continue;
        int64_t cpu = ts_tid_is_ours(tid) ? ts_now_ns(ts_thread_cpu_clock(tid)) : -1;
        if (cpu < 0) { /* died while sampling was stopped: its tid may be another process's now */
            atomic_store(&t->tid, 0);
            continue;
        }
        atomic_store(&t->sampled, 0);
        atomic_store(&t->seen_ns, atomic_load(&t->sent_ns));
        atomic_store(&t->last_cpu_ns, cpu);
        t->ctl_cpu_ns = cpu;
        atomic_store(&t->dead, 0);
        atomic_store(&t->unarmed, 0);
        ts_arm(t, tid);
    }
    pthread_mutex_unlock(&ts_reg_lock);
    rc = ts_control_start();
    if (rc) ts_sampler_stop();
    restore_sigmask(&mask); /* the control thread runs: it lowers a rate this thread cannot bear */
    return rc;
}

int ts_sampler_stop(void) {
    sigset_t mask = block_sigprof();
    atomic_store(&ts_active, 0);
    ts_control_stop();
    pthread_mutex_lock(&ts_reg_lock);
    int n = atomic_load(&ts_threads_hwm);
    for (int i = 0; i < n; i++) ts_disarm(&ts_threads[i]);
    pthread_mutex_unlock(&ts_reg_lock);
    quiesce();
    restore_sigmask(&mask); /* a signal left pending is delivered now and counted late */
    return 0;
}
