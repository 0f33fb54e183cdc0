/* Per-thread CPU timers of cpu mode (see sampler_int.h).
 *
 * perf_event task-clock is preferred (one fd per thread). The fds stay below
 * a reserve at the top of RLIMIT_NOFILE, so the program never gets EMFILE
 * because of us; a thread beyond it gets a POSIX CPU-clock timer, which
 * needs no fd. A thread for which neither can be armed is marked unarmed
 * and reported as never sampled. All of this runs under reg_lock. */
#include "sampler_int.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

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
        fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* The first task-bound perf event of a perf-idle system makes the kernel turn
 * its scheduling hooks on and wait for an RCU grace period: 6-12 ms on 2-vCPU
 * VMs, in whichever perf_event_open comes first. They stay on until ~1 s after
 * the last such event is closed. `record` calls this from a helper thread
 * while it imports, so the program's sampler start does not wait for it. */
int ts_timers_warm(void) {
    int fd = perf_open((int)syscall(SYS_gettid), 10000000);
    if (fd < 0) return fd;
    close(fd);
    return 0;
}

static int posix_timer_open(int tid, int64_t period_ns, timer_t *out) {
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID; /* the kernel accepts only threads of this process */
    sev.sigev_signo = SIGPROF;
    sev.sigev_value.sival_ptr = TS_COOKIE;
    sev._sigev_un._tid = tid;
    if (timer_create(ts_thread_cpu_clock(tid), &sev, out) != 0) return -errno;
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

/* The lowest fd number the program may still need: ours stay below it. */
static int fd_ceiling(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1 << 30)) return 1 << 30;
    int lim = (int)rl.rlim_cur, reserve = lim / 4 > 32 ? lim / 4 : 32;
    return lim - reserve;
}

int ts_timers_probe(int64_t interval_ns, int pref) {
    int self = (int)syscall(SYS_gettid);
    ts_timer_kind = TS_TIMER_POSIX;
    if (pref != TS_TIMER_POSIX) {
        int fd = perf_open(self, interval_ns);
        if (fd >= 0) {
            close(fd);
            ts_timer_kind = TS_TIMER_PERF;
            return 0;
        }
        if (pref == TS_TIMER_PERF) return fd;
    }
    timer_t probe;
    int rc = posix_timer_open(self, interval_ns, &probe);
    if (rc) return rc;
    timer_delete(probe);
    return 0;
}

static int arm_perf(ts_thread *t, int tid, int64_t interval) {
    int fd = perf_open(tid, interval);
    if (fd < 0) return fd;
    /* perf follows a tid, not a thread group: check again that the tid is
     * still one of ours now that the fd exists, then let it fire. */
    if (fd >= fd_ceiling() || ioctl(fd, PERF_EVENT_IOC_ID, &t->perf_id) != 0 || !ts_tid_is_ours(tid) ||
        ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
        close(fd);
        return -EMFILE;
    }
    t->perf_fd = fd;
    return 0;
}

/* A program may close descriptors it did not open (a daemon's closerange) and
 * reuse the numbers for files of its own: perf_fd is ours only while it still
 * names the event it was opened for. Anything else is never closed or
 * ioctl'ed by us; the thread's cpu-mode samples have stopped (counted). */
int ts_perf_fd_is_ours(ts_thread *t) {
    uint64_t id = 0;
    if (t->perf_fd < 0) return 0;
    if (ioctl(t->perf_fd, PERF_EVENT_IOC_ID, &id) == 0 && id == t->perf_id) return 1;
    atomic_fetch_add(&ts_C.timer_fds_lost, 1);
    t->perf_fd = -1;
    t->perf_lost = 1;
    return 0;
}

int ts_arm(ts_thread *t, int tid) {
    t->perf_lost = 0;
    if (ts_mode != TS_MODE_CPU) return 0;
    int64_t interval = atomic_load(&ts_interval_ns);
    if (ts_timer_kind == TS_TIMER_PERF && arm_perf(t, tid, interval) == 0) return 0;
    int rc = posix_timer_open(tid, interval, &t->timer);
    if (rc == 0) {
        t->has_timer = 1;
        if (ts_timer_kind == TS_TIMER_PERF) atomic_fetch_add(&ts_C.timer_fallbacks, 1);
        return 0;
    }
    atomic_store(&t->unarmed, 1);
    return rc;
}

void ts_disarm(ts_thread *t) {
    if (ts_perf_fd_is_ours(t)) {
        ioctl(t->perf_fd, PERF_EVENT_IOC_DISABLE, 0);
        close(t->perf_fd);
        t->perf_fd = -1;
    }
    t->perf_lost = 0; /* after the check, which marks a descriptor the program closed */
    if (t->has_timer) {
        timer_delete(t->timer);
        t->has_timer = 0;
    }
}

void ts_rearm_all(int64_t interval_ns) {
    struct itimerspec its;
    its.it_interval.tv_sec = interval_ns / 1000000000LL;
    its.it_interval.tv_nsec = interval_ns % 1000000000LL;
    its.it_value = its.it_interval;
    uint64_t period = (uint64_t)interval_ns;
    int n = atomic_load(&ts_threads_hwm);
    for (int i = 0; i < n; i++) {
        ts_thread *t = &ts_threads[i];
        if (!atomic_load(&t->tid)) continue;
        if (ts_perf_fd_is_ours(t)) ioctl(t->perf_fd, PERF_EVENT_IOC_PERIOD, &period);
        if (t->has_timer) timer_settime(t->timer, 0, &its, NULL);
    }
}

#ifdef TS_TEST_HOOKS
/* Every timer stopped, or started again, and wall mode's ticks with them. A perf event keeps
 * across DISABLE/ENABLE the time left to its next signal, so chunks of sampling shorter than the
 * period still see the rate (a new period would restart the count); a POSIX timer restarts at a
 * whole period. */
void ts_pause_all(int paused) {
    atomic_store(&ts_test_ticks_paused, paused); /* wall mode's ticks */
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (!paused) {
        int64_t interval_ns = atomic_load(&ts_interval_ns);
        its.it_interval.tv_sec = interval_ns / 1000000000LL;
        its.it_interval.tv_nsec = interval_ns % 1000000000LL;
        its.it_value = its.it_interval;
    }
    int n = atomic_load(&ts_threads_hwm);
    for (int i = 0; i < n; i++) {
        ts_thread *t = &ts_threads[i];
        if (!atomic_load(&t->tid)) continue;
        if (ts_perf_fd_is_ours(t)) ioctl(t->perf_fd, paused ? PERF_EVENT_IOC_DISABLE : PERF_EVENT_IOC_ENABLE, 0);
        if (t->has_timer) timer_settime(t->timer, 0, &its, NULL);
    }
}
#endif
