/* The control thread of a sampling session (see sampler_int.h).
 *
 * Wall mode: every tick it accounts the elapsed wall time to each registered
 * thread, then signals only the threads that ran at least half an interval
 * since the previous tick and still run. A thread blocked in the kernel is
 * not signalled (a caught signal would end pause() and interrupt its other
 * waits): its frame chain cannot change while it sleeps, so this thread walks it with the
 * same guarded loads and keeps the walk only if the thread's CPU clock did
 * not move meanwhile and its thread state still names it.
 *
 * Both modes: every budget period (budget_period_ns) it compares what sampling cost (the
 * handlers' own CPU time, the kernel's delivery of each signal, this
 * thread's CPU time) with the process's CPU time. Above TS_BUDGET_SHARE_PCT
 * it lowers the rate (in powers of two) to what fits; after TS_CALM_PERIODS
 * periods under a quarter of it, it doubles the rate back, never above the
 * one requested.
 *
 * At each budget check it also maps the ring's next pages ahead of the
 * handlers (ring.h).
 *
 * Its condition-variable sleep is woken by stop(); it wakes only for ticks
 * and budget checks, never per sample. */
#include "sampler_int.h"
#include "safeload.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The budget period: 50 sampling intervals, within these bounds. In cpu mode
 * each period is a wake-up of this thread, ~70 us of CPU on a VM: every
 * 25 ms that was 0.3 % of a CPU whatever the rate. Extreme rates, the ones
 * the budget is for, keep the shortest period. */
#define TS_BUDGET_MIN_NS    25000000LL
#define TS_BUDGET_MAX_NS    250000000LL
#define TS_BUDGET_INTERVALS 50
static int64_t budget_period_ns(void) {
    int64_t period = TS_BUDGET_INTERVALS * atomic_load(&ts_interval_ns);
    return period < TS_BUDGET_MIN_NS ? TS_BUDGET_MIN_NS : period > TS_BUDGET_MAX_NS ? TS_BUDGET_MAX_NS : period;
}
#define TS_BUDGET_SHARE_PCT 25
#define TS_BUDGET_FLOOR_PCT 10          /* of one CPU: below it, the rate is never lowered */
#define TS_MAX_INTERVAL_NS  100000000LL /* the budget never lowers the rate below 10 Hz */

static pthread_t ctl_thread;
static int64_t ts_cpus; /* online at start (sysconf reads sysfs: not at every period) */
static int ctl_running;
static int ctl_stop;
static pthread_mutex_t ctl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ctl_cv;
static int cv_ready;
int64_t ts_max_interval_ns;

#ifdef TS_TEST_HOOKS
/* Test builds: the control thread pauses this long once a remote walk has
 * found the thread stood still, before it publishes the sample: the moment
 * it may be preempted on a loaded machine while the walked thread runs on. */
_Atomic int64_t ts_test_remote_pause_ns;
_Atomic int ts_test_ticks_paused;
#define ticks_paused() atomic_load(&ts_test_ticks_paused)
static void test_remote_pause(void) {
    int64_t ns = atomic_load(&ts_test_remote_pause_ns);
    struct timespec d = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    if (ns > 0) nanosleep(&d, NULL);
}
#else
#define test_remote_pause() ((void)0)
#define ticks_paused()      0
#endif

static void signal_thread(ts_thread *t, int tid, const siginfo_t *info) {
    /* rt_tgsigqueueinfo checks the tid is in our thread group. A tid found
     * dead is never signalled again: it may be reused. */
    if (syscall(SYS_rt_tgsigqueueinfo, ts_pid, tid, SIGPROF, info) != 0 && errno == ESRCH) atomic_store(&t->dead, 1);
}

/* Is a thread that stood still between two clock reads blocked in the
 * kernel, rather than waiting for a CPU? Its state letter in /proc says. */
static int blocked_in_kernel(int tid) {
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *end = strrchr(buf, ')'); /* the name (at most 15 bytes) may hold ')' */
    return end && end[1] == ' ' && end[2] && end[2] != 'R';
}

/* A thread that ran in the last interval may have blocked since: a signal
 * now would end its pause() or make its wait retry (CI caught pause() ended
 * 0.7 ms in). Its CPU clock moving since the tick read it says it still runs.
 * Standing still, it is walked from here, unless --native wants the C stack
 * of a thread that only waits for a CPU: the handler unwinds it once it runs. */
static int still_running(int tid, int64_t cpu) {
    if (ts_now_ns(ts_thread_cpu_clock(tid)) != cpu) return 1;
    return ts_max_native && !blocked_in_kernel(tid);
}

/* Walks a thread that is not running; 0 if the walk cannot be trusted. ran:
 * it ran half the last interval or more, then stopped. */
static int remote_walk(ts_thread *t, int tid, int64_t cpu, int ran) {
    int fault = 0;
    if (!t->tstate || !ts_safeload_ensure()) return 0;
    if (ts_load((uintptr_t)t->tstate + ts_tstate_ident_off, &fault) != t->ident || fault) return 0;
    uint64_t pos;
    ts_slot *s = ts_remote_claim(&pos);
    if (!s) return 1;
    ts_walk_result r;
    ts_walk(t->tstate, s->frames, ts_max_frames, &r);
    /* Stamped before the recheck: the frames are known to hold from the first
     * clock read to the second, and the control thread may be preempted for
     * milliseconds after it, while the thread runs on. */
    int64_t now = ts_now_ns(CLOCK_MONOTONIC);
    if (ts_now_ns(ts_thread_cpu_clock(tid)) != cpu) {
        ts_remote_void(s, pos);
        atomic_fetch_add(&ts_C.remote_discarded, 1); /* it ran meanwhile: its time goes to the next sample */
        return 1;
    }
    test_remote_pause();
    ts_remote_publish(t, tid, s, pos, &r, cpu, now, ran);
    return 1;
}

static void wall_tick(uint64_t k, int64_t interval) {
    siginfo_t info = ts_own_siginfo();
    atomic_fetch_add_explicit(&ts_C.ticks, k, memory_order_relaxed);
    atomic_fetch_add_explicit(&ts_C.wakeups, 1, memory_order_relaxed);
    pthread_mutex_lock(&ts_reg_lock);
    int n = atomic_load(&ts_threads_hwm);
    for (int i = 0; i < n; i++) {
        ts_thread *t = &ts_threads[i];
        int tid = atomic_load(&t->tid);
        if (!tid || atomic_load(&t->dead)) continue;
        atomic_fetch_add_explicit(&t->sent_ns, k * (uint64_t)interval, memory_order_relaxed);
        int64_t cpu = ts_now_ns(ts_thread_cpu_clock(tid));
        if (cpu < 0) {
            atomic_store(&t->dead, 1);
            continue;
        }
        int64_t ran = cpu - t->ctl_cpu_ns;
        t->ctl_cpu_ns = cpu;
        int was_running = ran * 2 >= interval;
        if ((was_running && still_running(tid, cpu)) || !remote_walk(t, tid, cpu, was_running))
            signal_thread(t, tid, &info);
    }
    pthread_mutex_unlock(&ts_reg_lock);
}

static int64_t self_cpu_ns(void) { return ts_now_ns(CLOCK_THREAD_CPUTIME_ID); }

typedef struct {
    int64_t at, handler, signals, proc, self;
    int calm; /* consecutive periods well under budget */
} ts_budget_mark;

/* Periods well under budget before the rate goes back up: one quiet period
 * may only mean the program was descheduled on a busy machine. */
#define TS_CALM_PERIODS 8

static ts_budget_mark budget_mark(int64_t now) {
    ts_budget_mark m = {now,
                        (int64_t)atomic_load(&ts_C.handler_ns),
                        (int64_t)atomic_load(&ts_C.signals),
                        ts_now_ns(CLOCK_PROCESS_CPUTIME_ID),
                        self_cpu_ns(),
                        0};
    return m;
}

static void budget_check(ts_budget_mark *prev, int64_t now) {
    ts_budget_mark cur = budget_mark(now);
    int64_t cost =
        (cur.handler - prev->handler) + (cur.signals - prev->signals) * ts_delivery_ns + (cur.self - prev->self);
    /* Over budget: more than a quarter of the process's CPU time, and more
     * than TS_BUDGET_FLOOR_PCT of one CPU. The floor is for mostly idle
     * programs, whose sampling cost (the walks of blocked threads in wall
     * mode) is most of their CPU time yet too little to matter. */
    int64_t proc = cur.proc - prev->proc, wall = cur.at - prev->at;
    int over = cost * 100 > proc * TS_BUDGET_SHARE_PCT && cost * 100 > wall * TS_BUDGET_FLOOR_PCT;
    cur.calm = cost * 400 < proc * TS_BUDGET_SHARE_PCT || cost * 400 < wall * TS_BUDGET_FLOOR_PCT ? prev->calm + 1 : 0;
    *prev = cur;
    int64_t interval = atomic_load(&ts_interval_ns), next = interval;
    if (over && interval < TS_MAX_INTERVAL_NS) {
        /* Straight to the rate that fits (in powers of two), not one halving per period. */
        while (next < TS_MAX_INTERVAL_NS && cost * 100 * interval > proc * TS_BUDGET_SHARE_PCT * next) next *= 2;
        if (next > TS_MAX_INTERVAL_NS) next = TS_MAX_INTERVAL_NS;
        atomic_fetch_add(&ts_C.rate_lowered, 1);
    } else if (cur.calm >= TS_CALM_PERIODS && interval > ts_requested_interval_ns) {
        next = interval / 2 < ts_requested_interval_ns ? ts_requested_interval_ns : interval / 2;
        prev->calm = 0;
    }
    if (next == interval) return;
    atomic_store(&ts_interval_ns, next);
    if (next > ts_max_interval_ns) ts_max_interval_ns = next;
    if (ts_mode == TS_MODE_CPU) {
        pthread_mutex_lock(&ts_reg_lock);
        ts_rearm_all(next);
        pthread_mutex_unlock(&ts_reg_lock);
    }
}

/* Maps the ring's pages ahead of the handlers (ring.h): twice what they claimed in the
 * last budget period, or what the rate and the threads would claim in one if more. */
static void map_ring_ahead(uint64_t *last_head, int64_t period_ns) {
    uint64_t head = atomic_load_explicit(&ts_R.head, memory_order_relaxed), claimed = head - *last_head;
    *last_head = head;
    int64_t streams = ts_thread_count();
    if (ts_mode == TS_MODE_CPU && ts_cpus > 0 && streams > ts_cpus) streams = ts_cpus; /* no more run at once */
    uint64_t expected = (uint64_t)(period_ns / atomic_load(&ts_interval_ns) * (streams > 0 ? streams : 1));
    atomic_fetch_add_explicit(&ts_C.ring_pages_mapped,
                              ts_ring_map_ahead(2 * (claimed > expected ? claimed : expected) + 64),
                              memory_order_relaxed);
}

static void *control_main(void *arg) {
    (void)arg;
    /* Named so that `truestack attach` can tell from /proc, without injecting
     * anything, that a truestack sampler runs in this process (remote/signal_sources.py). */
    (void)prctl(PR_SET_NAME, TS_CONTROL_THREAD_NAME, 0, 0, 0);
    int64_t cpu_at = self_cpu_ns();
    uint64_t last_head = atomic_load(&ts_R.head);
    /* No signal of the program's lands here; guarded loads still need faults. */
    sigset_t all;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    map_ring_ahead(&last_head, budget_period_ns());
    int64_t now = ts_now_ns(CLOCK_MONOTONIC);
    int64_t next_tick = now + atomic_load(&ts_interval_ns), next_budget = now + budget_period_ns();
    ts_budget_mark mark = budget_mark(now);
    pthread_mutex_lock(&ctl_mu);
    while (!ctl_stop) {
        int64_t wake = ts_mode == TS_MODE_WALL && next_tick < next_budget ? next_tick : next_budget;
        struct timespec ts = {wake / 1000000000LL, wake % 1000000000LL};
        if (pthread_cond_timedwait(&ctl_cv, &ctl_mu, &ts) != ETIMEDOUT && ctl_stop) break;
        pthread_mutex_unlock(&ctl_mu);
        now = ts_now_ns(CLOCK_MONOTONIC);
        int64_t interval = atomic_load(&ts_interval_ns);
        if (ts_mode == TS_MODE_WALL && now >= next_tick) {
            /* Descheduled past several ticks: one round accounts for all of
             * them, so no wall time goes missing and no burst follows. */
            uint64_t k = 1 + (uint64_t)((now - next_tick) / interval);
            next_tick += (int64_t)k * interval;
            if (!ticks_paused()) wall_tick(k, interval);
        }
        if (now >= next_budget) {
            budget_check(&mark, now);
            int64_t period = budget_period_ns(); /* of the rate the check may have changed */
            map_ring_ahead(&last_head, period);
            next_budget = now + period;
            int64_t cpu = self_cpu_ns();
            atomic_fetch_add_explicit(&ts_C.control_ns, (uint64_t)(cpu - cpu_at), memory_order_relaxed);
            cpu_at = cpu;
        }
        pthread_mutex_lock(&ctl_mu);
    }
    pthread_mutex_unlock(&ctl_mu);
    atomic_fetch_add_explicit(&ts_C.control_ns, (uint64_t)(self_cpu_ns() - cpu_at), memory_order_relaxed);
    return NULL;
}

int ts_control_start(void) {
    if (!cv_ready) {
        pthread_condattr_t a;
        pthread_condattr_init(&a);
        pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
        pthread_cond_init(&ctl_cv, &a);
        pthread_condattr_destroy(&a);
        cv_ready = 1;
    }
    ts_max_interval_ns = ts_requested_interval_ns;
    ts_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    ctl_stop = 0;
    int rc = pthread_create(&ctl_thread, NULL, control_main, NULL);
    if (rc) return -rc;
    ctl_running = 1;
    return 0;
}

void ts_control_stop(void) {
    if (!ctl_running) return;
    pthread_mutex_lock(&ctl_mu);
    ctl_stop = 1;
    pthread_cond_signal(&ctl_cv);
    pthread_mutex_unlock(&ctl_mu);
    pthread_join(ctl_thread, NULL);
    ctl_running = 0;
}

void ts_control_after_fork(void) {
    ctl_running = 0; /* the control thread does not exist in the child */
    pthread_mutex_init(&ctl_mu, NULL);
    cv_ready = 0; /* initialised again at the next start */
}
