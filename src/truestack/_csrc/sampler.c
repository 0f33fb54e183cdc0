/* Sampling core (see sampler.h).
 *
 * Signals: everything arrives as SIGPROF. Ours are recognised by their
 * origin (SI_TIMER with our cookie, perf's POLL_* fasync codes, SI_QUEUE
 * with our cookie from the wall sampler thread); anything else is chained
 * to the handler that was installed before ours. The handler stays
 * installed for the life of the process: a timer signal arriving after
 * stop() finds the sampler inactive and returns.
 *
 * fork(): the child stops sampling cleanly. Timers and the sampler thread
 * do not survive fork, inherited perf fds are closed, and the inherited ring
 * contents (the parent's samples) are discarded; Python code in the child
 * sees ts_forked_child and may start a new session.
 */
#include "sampler.h"
#include "ring.h"
#include "safeload.h"
#include "walker.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TS_COOKIE ((void *)0x7472756573746b21ULL) /* "truestk!" */

typedef struct {
    _Atomic int tid; /* 0 = free slot */
    int perf_fd;
    int has_timer;
    timer_t timer;
    _Atomic int dead;
    _Atomic int64_t last_cpu_ns;
    _Atomic int sampled; /* has had a sample: last_cpu_ns is a real baseline */
    /* Wall mode: ticks the sampler thread sent / the handler accounted for.
     * Non-realtime signals coalesce while a thread waits for a CPU, so each
     * sample weighs every tick since the previous one. */
    _Atomic uint64_t sent, seen;
} ts_thread;

ts_counters ts_C;
int ts_forked_child;
int64_t ts_interval_ns;
int ts_mode;

static ts_thread threads[TS_MAX_THREADS];
static _Atomic int threads_hwm;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int active;
static int timer_kind;
static int max_frames;
static struct sigaction old_prof;
static int handler_installed;
static pthread_t wall_thread;
static int wall_running;
static _Atomic int wall_stop;
static pid_t my_pid;

const char *ts_timer_name(int t) {
    switch (t) {
    case TS_TIMER_PERF: return "perf_event task-clock";
    case TS_TIMER_POSIX: return "timer_create CPU clock";
    case TS_TIMER_THREAD: return "sampler thread (rt_tgsigqueueinfo)";
    default: return "none";
    }
}

TS_SIGNAL_SAFE static int64_t now_ns(clockid_t clk) {
    struct timespec ts;
    if (clock_gettime(clk, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static clockid_t thread_cpu_clock(int tid) {
    /* MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): any thread of the process
     * can read or arm another thread's CPU clock by tid. */
    return (clockid_t)((~(unsigned)tid << 3) | 6);
}

TS_SIGNAL_SAFE static ts_thread *find_thread(int tid) {
    int n = atomic_load_explicit(&threads_hwm, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (atomic_load_explicit(&threads[i].tid, memory_order_relaxed) == tid) return &threads[i];
    return NULL;
}

TS_SIGNAL_SAFE static int is_ours(const siginfo_t *si) {
    if (si->si_code == SI_TIMER) return si->si_value.sival_ptr == TS_COOKIE;
    if (si->si_code == SI_QUEUE) return si->si_value.sival_ptr == TS_COOKIE && si->si_pid == my_pid;
    if (si->si_code >= POLL_IN && si->si_code <= POLL_HUP) return timer_kind == TS_TIMER_PERF;
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

TS_SIGNAL_SAFE static void take_sample(const siginfo_t *si) {
    int tid = (int)syscall(SYS_gettid);
    ts_thread *t = find_thread(tid);
    int64_t now = now_ns(CLOCK_MONOTONIC);
    int64_t cpu = now_ns(CLOCK_THREAD_CPUTIME_ID);
    int64_t delta = -1;
    int overrun = si->si_code == SI_TIMER ? si->si_overrun : 0;
    if (t) {
        int64_t last = atomic_exchange_explicit(&t->last_cpu_ns, cpu, memory_order_relaxed);
        int had = atomic_exchange_explicit(&t->sampled, 1, memory_order_relaxed);
        if (last >= 0 && (had || ts_mode == TS_MODE_CPU)) delta = cpu - last;
    }
    int64_t weight;
    int state = TS_STATE_UNKNOWN;
    if (ts_mode == TS_MODE_CPU) {
        /* The thread's own CPU clock since its previous sample is exact CPU
         * time, whatever the timer's granularity or coalesced signals. */
        weight = delta > 0 ? delta : ts_interval_ns * (1 + (int64_t)overrun);
        state = TS_STATE_RUNNING;
    } else {
        int64_t ticks = 1;
        if (t) {
            uint64_t sent = atomic_load_explicit(&t->sent, memory_order_relaxed);
            uint64_t seen = atomic_exchange_explicit(&t->seen, sent, memory_order_relaxed);
            if (sent > seen) ticks = (int64_t)(sent - seen);
            if (ticks > 1) overrun = (int)(ticks - 1);
        }
        weight = ts_interval_ns * ticks;
        if (delta >= 0) state = delta * 2 >= ts_interval_ns ? TS_STATE_RUNNING : TS_STATE_IDLE;
    }
    if (overrun > 0) atomic_fetch_add_explicit(&ts_C.overruns, (uint64_t)overrun, memory_order_relaxed);
    uint64_t pos;
    ts_slot *s = ts_ring_claim(&pos);
    if (!s) {
        atomic_fetch_add_explicit(&ts_C.dropped, 1, memory_order_relaxed);
        return;
    }
    ts_walk_result r = {0, 0, TS_UNGUARDED};
    /* A walk relies on our fault handler: never walk without it. */
    if (ts_safeload_guarded()) ts_walk(ts_current_tstate(), s->frames, max_frames, &r);
    s->tid = tid;
    s->nframes = (uint16_t)r.nframes;
    s->state = (uint8_t)state;
    s->partial = (uint8_t)r.partial;
    s->depth = (uint32_t)r.depth;
    s->overrun = (uint32_t)overrun;
    s->time_ns = now;
    s->weight_ns = weight;
    s->cpu_delta_ns = delta > 0 ? delta : 0;
    ts_ring_commit(s, pos);
    atomic_fetch_add_explicit(&ts_C.samples, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ts_C.weight_ns, (uint64_t)weight, memory_order_relaxed);
    if (r.partial) atomic_fetch_add_explicit(&ts_C.partial[r.partial], 1, memory_order_relaxed);
}

TS_SIGNAL_SAFE static void on_sigprof(int sig, siginfo_t *si, void *uc) {
    int saved_errno = errno;
    if (!is_ours(si)) {
        atomic_fetch_add_explicit(&ts_C.foreign, 1, memory_order_relaxed);
        chain_prof(sig, si, uc);
    } else if (!atomic_load_explicit(&active, memory_order_acquire)) {
        atomic_fetch_add_explicit(&ts_C.late, 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&ts_C.signals, 1, memory_order_relaxed);
        take_sample(si);
    }
    errno = saved_errno;
}

static int install_handler(void) {
    struct sigaction cur;
    if (sigaction(SIGPROF, NULL, &cur) != 0) return -errno;
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigprof) return 0;
    /* Resolve lazily bound symbols before a signal can need them. */
    (void)now_ns(CLOCK_MONOTONIC);
    (void)now_ns(CLOCK_THREAD_CPUTIME_ID);
    (void)syscall(SYS_gettid);
    (void)ts_current_tstate();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGPROF);
    if (sigaction(SIGPROF, &sa, &old_prof) != 0) return -errno;
    handler_installed = 1;
    return 0;
}

/* -- per-thread timers ------------------------------------------------ */

static int perf_open(int tid, int64_t period_ns) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.sample_period = (uint64_t)period_ns;
    a.wakeup_events = 1;
    a.disabled = 1;
    /* exclude_kernel stays 0: CPU time spent in syscalls is CPU time. */
    int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) return -errno;
    struct f_owner_ex owner = {F_OWNER_TID, tid};
    if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, SIGPROF) != 0 ||
        fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

static int posix_timer_open(int tid, int64_t period_ns, timer_t *out) {
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev.sigev_value.sival_ptr = TS_COOKIE;
    sev._sigev_un._tid = tid;
    if (timer_create(thread_cpu_clock(tid), &sev, out) != 0) return -errno;
    struct itimerspec its;
    its.it_interval.tv_sec = period_ns / 1000000000LL;
    its.it_interval.tv_nsec = period_ns % 1000000000LL;
    its.it_value = its.it_interval;
    if (timer_settime(*out, 0, &its, NULL) != 0) {
        int e = errno;
        timer_delete(*out);
        return -e;
    }
    return 0;
}

static void disarm(ts_thread *t) {
    if (t->perf_fd >= 0) {
        ioctl(t->perf_fd, PERF_EVENT_IOC_DISABLE, 0);
        close(t->perf_fd);
        t->perf_fd = -1;
    }
    if (t->has_timer) {
        timer_delete(t->timer);
        t->has_timer = 0;
    }
}

static int arm(ts_thread *t, int tid) {
    if (ts_mode != TS_MODE_CPU) return 0;
    if (timer_kind == TS_TIMER_PERF) {
        int fd = perf_open(tid, ts_interval_ns);
        if (fd < 0) return fd;
        t->perf_fd = fd;
        return 0;
    }
    int rc = posix_timer_open(tid, ts_interval_ns, &t->timer);
    if (rc == 0) t->has_timer = 1;
    return rc;
}

/* Callers hold reg_lock. */
static int register_locked(int tid) {
    if (tid <= 0) return -EINVAL;
    if (find_thread(tid)) return 0;
    int n = atomic_load(&threads_hwm), slot = -1;
    for (int i = 0; i < n; i++)
        if (atomic_load(&threads[i].tid) == 0) {
            slot = i;
            break;
        }
    if (slot < 0) {
        if (n >= TS_MAX_THREADS) return -ENOSPC;
        slot = n;
    }
    ts_thread *t = &threads[slot];
    t->perf_fd = -1;
    t->has_timer = 0;
    atomic_store(&t->dead, 0);
    atomic_store(&t->sampled, 0);
    atomic_store(&t->sent, 0);
    atomic_store(&t->seen, 0);
    int64_t cpu = now_ns(thread_cpu_clock(tid));
    atomic_store(&t->last_cpu_ns, cpu);
    if (cpu < 0) return -ESRCH; /* already gone */
    if (atomic_load(&active)) {
        int rc = arm(t, tid);
        if (rc < 0) return rc;
    }
    atomic_store_explicit(&t->tid, tid, memory_order_release);
    if (slot == n) atomic_store_explicit(&threads_hwm, n + 1, memory_order_release);
    return 0;
}

int ts_register_thread(int tid) {
    pthread_mutex_lock(&reg_lock);
    int rc = register_locked(tid);
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

int ts_unregister_thread(int tid) {
    pthread_mutex_lock(&reg_lock);
    ts_thread *t = find_thread(tid);
    if (t) {
        disarm(t);
        atomic_store_explicit(&t->tid, 0, memory_order_release);
    }
    pthread_mutex_unlock(&reg_lock);
    return t ? 0 : -ENOENT;
}

int ts_thread_count(void) {
    int n = atomic_load(&threads_hwm), c = 0;
    for (int i = 0; i < n; i++) c += atomic_load(&threads[i].tid) != 0;
    return c;
}

int ts_thread_tids(int *out, int max) {
    pthread_mutex_lock(&reg_lock);
    int n = atomic_load(&threads_hwm), c = 0;
    for (int i = 0; i < n && c < max; i++) {
        int tid = atomic_load(&threads[i].tid);
        if (tid) out[c++] = tid;
    }
    pthread_mutex_unlock(&reg_lock);
    return c;
}

int ts_thread_is_dead(int tid) {
    ts_thread *t = find_thread(tid);
    return t ? atomic_load(&t->dead) : 1;
}

/* -- wall sampler thread ---------------------------------------------- */

static void *wall_main(void *arg) {
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    int64_t next = now_ns(CLOCK_MONOTONIC);
    siginfo_t info;
    memset(&info, 0, sizeof info);
    info.si_signo = SIGPROF;
    info.si_code = SI_QUEUE;
    info.si_pid = my_pid;
    info.si_uid = getuid();
    info.si_value.sival_ptr = TS_COOKIE;
    next += ts_interval_ns;
    while (!atomic_load(&wall_stop)) {
        struct timespec ts = {next / 1000000000LL, next % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
        if (atomic_load(&wall_stop)) break;
        /* If this thread was descheduled past several ticks, account for
         * all of them in one signal: no wall time goes missing and no burst
         * of signals follows. */
        int64_t now = now_ns(CLOCK_MONOTONIC);
        uint64_t k = now > next ? 1 + (uint64_t)((now - next) / ts_interval_ns) : 1;
        next += (int64_t)k * ts_interval_ns;
        atomic_fetch_add_explicit(&ts_C.ticks, k, memory_order_relaxed);
        atomic_fetch_add_explicit(&ts_C.wakeups, 1, memory_order_relaxed);
        pthread_mutex_lock(&reg_lock);
        int n = atomic_load(&threads_hwm);
        for (int i = 0; i < n; i++) {
            ts_thread *t = &threads[i];
            int tid = atomic_load(&t->tid);
            if (!tid || atomic_load(&t->dead)) continue;
            atomic_fetch_add_explicit(&t->sent, k, memory_order_relaxed);
            /* A tid found dead is never signalled again: it may be reused. */
            if (syscall(SYS_rt_tgsigqueueinfo, my_pid, tid, SIGPROF, &info) != 0 && errno == ESRCH)
                atomic_store(&t->dead, 1);
        }
        pthread_mutex_unlock(&reg_lock);
    }
    return NULL;
}

/* -- fork -------------------------------------------------------------- */

static void atfork_prepare(void) { pthread_mutex_lock(&reg_lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&reg_lock); }
static void atfork_child(void) {
    pthread_mutex_init(&reg_lock, NULL);
    if (atomic_load(&active) || wall_running) ts_forked_child = 1;
    atomic_store(&active, 0);
    wall_running = 0; /* the sampler thread does not exist here */
    my_pid = getpid();
    int n = atomic_load(&threads_hwm);
    for (int i = 0; i < n; i++) {
        ts_thread *t = &threads[i];
        if (t->perf_fd >= 0) close(t->perf_fd); /* counts the parent's thread */
        t->perf_fd = -1;
        t->has_timer = 0; /* POSIX timers are not inherited */
        atomic_store(&t->tid, 0);
    }
    atomic_store(&threads_hwm, 0);
    /* Undrained samples belong to the parent, which reports them. */
    ts_ring_reset_after_fork();
}

/* -- lifecycle ---------------------------------------------------------- */

int ts_sampler_active(void) { return atomic_load(&active); }
int ts_sampler_timer(void) { return timer_kind; }

int ts_sampler_start(int mode, int64_t interval_ns, int frames, uint64_t ring_slots, int timer_pref) {
    static int atfork_done;
    if (atomic_load(&active)) return -EBUSY;
    if (!atfork_done) {
        pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
        atfork_done = 1;
    }
    my_pid = getpid();
    ts_forked_child = 0;
    if (ts_safeload_install() != 0) return -errno;
    if (ts_ring_init(ring_slots, frames) != 0) return -ENOMEM;
    max_frames = frames;
    ts_mode = mode;
    ts_interval_ns = interval_ns;
    int rc = install_handler();
    if (rc) return rc;
    int self = (int)syscall(SYS_gettid);
    if (mode == TS_MODE_CPU) {
        /* Probe perf_event on this thread; fall back to POSIX CPU timers. */
        timer_kind = TS_TIMER_POSIX;
        if (timer_pref != TS_TIMER_POSIX) {
            int fd = perf_open(self, interval_ns);
            if (fd >= 0) {
                ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
                close(fd);
                timer_kind = TS_TIMER_PERF;
            } else if (timer_pref == TS_TIMER_PERF) {
                return fd;
            }
        }
        if (timer_kind == TS_TIMER_POSIX) {
            timer_t probe;
            rc = posix_timer_open(self, interval_ns, &probe);
            if (rc) return rc;
            timer_delete(probe);
        }
    } else {
        timer_kind = TS_TIMER_THREAD;
    }
    pthread_mutex_lock(&reg_lock);
    atomic_store(&active, 1);
    int n = atomic_load(&threads_hwm);
    for (int i = 0; i < n; i++) {
        ts_thread *t = &threads[i];
        int tid = atomic_load(&t->tid);
        if (!tid) continue;
        atomic_store(&t->sampled, 0);
        atomic_store(&t->seen, atomic_load(&t->sent));
        atomic_store(&t->last_cpu_ns, now_ns(thread_cpu_clock(tid)));
        if (arm(t, tid) < 0) atomic_store(&t->tid, 0); /* thread gone meanwhile */
    }
    pthread_mutex_unlock(&reg_lock);
    if (mode == TS_MODE_WALL) {
        atomic_store(&wall_stop, 0);
        rc = pthread_create(&wall_thread, NULL, wall_main, NULL);
        if (rc) {
            ts_sampler_stop();
            return -rc;
        }
        wall_running = 1;
    }
    return 0;
}

int ts_sampler_stop(void) {
    atomic_store(&active, 0);
    if (wall_running) {
        atomic_store(&wall_stop, 1);
        pthread_join(wall_thread, NULL);
        wall_running = 0;
    }
    pthread_mutex_lock(&reg_lock);
    int n = atomic_load(&threads_hwm);
    for (int i = 0; i < n; i++) disarm(&threads[i]);
    pthread_mutex_unlock(&reg_lock);
    return 0;
}
