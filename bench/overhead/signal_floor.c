/* The kernel's share of a sampling profiler's cost, per timer mechanism: a
 * fixed busy loop run with no signals, then with SIGPROF delivered at a rate
 * to a handler that only counts, from each source a sampler could use.
 *
 *   cpu mode (signal after each PERIOD of the thread's CPU time):
 *     perf     perf_event task-clock, one fd per thread (F_SETOWN_EX to the tid)
 *     thread   timer_create(CLOCK_THREAD_CPUTIME_ID of the tid, SIGEV_THREAD_ID)
 *     itimer   setitimer(ITIMER_PROF): one process-wide timer; the kernel picks
 *              the thread, so it cannot target threads (fits one-thread programs)
 *   wall mode (signal after each PERIOD of wall time):
 *     tgkill   a sampler thread: clock_nanosleep(TIMER_ABSTIME) + tgkill to
 *              every worker per tick (what truestack's control thread does)
 *     mono     timer_create(CLOCK_MONOTONIC, SIGEV_THREAD_ID), one per thread
 *
 *   signal_floor SOURCE RATE_HZ LOOPS [THREADS [PAIRS]]
 *
 * THREADS workers run the loop (the second one half of LOOPS, so the truth
 * is uneven and a source that misattributes shows it). Prints one line:
 *   <wall s> <process CPU s> then per worker: <thread CPU s> <wall s> <signals>
 *
 * With PAIRS (one worker): the loop is cut into 2*PAIRS chunks, the source
 * disarmed in one chunk of each pair and armed in the other (order ABBA, so
 * a drifting load cancels). Neighbouring chunks see the same machine load,
 * which whole runs on a shared machine do not; one line per chunk:
 *   chunk <armed 0|1> <thread CPU s> <process CPU s> <wall s> <signals>
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_WORKERS 2

typedef struct {
    long loops;
    pid_t tid;
    double cpu_s, wall_s;
    long received;
} worker;

static __thread volatile long received; /* per thread: the handler counts where it lands */
static const char *source;
static long period_ns;
static worker workers[MAX_WORKERS];
static int nworkers;
static pthread_barrier_t ready;
static volatile int done;
static int pairs;                   /* chunked mode when > 0 */
static int perf_fd = -1;            /* this worker's source, to arm and disarm (chunked mode) */
static timer_t posix_timer;
static pthread_mutex_t arm_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t arm_cv = PTHREAD_COND_INITIALIZER;
static int tgkill_armed = 1;        /* the sampler thread idles (no wake-ups) while 0 */

static void on_sigprof(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)si; (void)uc;
    received++;
}

static double clock_s(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static struct timespec period_ts(void) {
    struct timespec ts = {period_ns / 1000000000L, period_ns % 1000000000L};
    return ts;
}

/* Wall mode the way truestack's control thread does it: absolute deadlines
 * (no drift from the loop's own time), one signal per worker per tick. */
static void *tgkill_thread(void *arg) {
    (void)arg;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    while (!done) {
        pthread_mutex_lock(&arm_mu);
        if (!tgkill_armed) {
            while (!tgkill_armed && !done) pthread_cond_wait(&arm_cv, &arm_mu);
            clock_gettime(CLOCK_MONOTONIC, &next); /* deadlines restart at re-arming */
        }
        pthread_mutex_unlock(&arm_mu);
        next.tv_nsec += period_ns;
        while (next.tv_nsec >= 1000000000L) { next.tv_nsec -= 1000000000L; next.tv_sec++; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        for (int i = 0; i < nworkers; i++)
            if (workers[i].tid) syscall(SYS_tgkill, getpid(), workers[i].tid, SIGPROF);
    }
    return NULL;
}

static int start_perf(pid_t tid) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.sample_period = (unsigned long long)period_ns;
    a.wakeup_events = 1;
    a.disabled = 1;
    int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, 0);
    if (fd < 0) return -1;
    perf_fd = fd;
    struct f_owner_ex owner = {F_OWNER_TID, tid};
    if (fcntl(fd, F_SETOWN_EX, &owner) || fcntl(fd, F_SETSIG, SIGPROF) ||
        fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0))
        return -1;
    return 0;
}

static int start_posix(clockid_t clock, pid_t tid) {
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = tid;
    if (timer_create(clock, &sev, &posix_timer)) return -1;
    struct itimerspec its = {period_ts(), period_ts()};
    return timer_settime(posix_timer, 0, &its, NULL);
}

static void set_itimer(int on) {
    struct timeval p = {on ? period_ns / 1000000000L : 0, on ? period_ns % 1000000000L / 1000 : 0};
    struct itimerval it = {p, p};
    setitimer(ITIMER_PROF, &it, NULL);
}

/* Chunked mode: turn the one worker's source on or off between chunks. */
static void arm(int on) {
    if (!strcmp(source, "perf")) {
        ioctl(perf_fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
    } else if (!strcmp(source, "thread") || !strcmp(source, "mono")) {
        struct timespec zero = {0, 0};
        struct itimerspec its = {on ? period_ts() : zero, on ? period_ts() : zero};
        timer_settime(posix_timer, 0, &its, NULL);
    } else if (!strcmp(source, "itimer")) {
        set_itimer(on);
    } else if (!strcmp(source, "tgkill")) {
        pthread_mutex_lock(&arm_mu);
        tgkill_armed = on;
        pthread_cond_signal(&arm_cv);
        pthread_mutex_unlock(&arm_mu);
    }
}

static void chunks(worker *w) {
    long per_chunk = w->loops / (2L * pairs);
    for (int p = 0; p < pairs; p++) {
        for (int k = 0; k < 2; k++) {
            int on = (p % 2 == 0) ? k : !k; /* ABBA: off,on then on,off */
            arm(on);
            long r0 = received;
            double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), p0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            double t0 = clock_s(CLOCK_MONOTONIC);
            volatile double x = 0;
            for (long i = 0; i < per_chunk; i++) x += (double)i * 0.5;
            printf("chunk %d %.9f %.9f %.9f %ld\n", on, clock_s(CLOCK_THREAD_CPUTIME_ID) - c0,
                   clock_s(CLOCK_PROCESS_CPUTIME_ID) - p0, clock_s(CLOCK_MONOTONIC) - t0, received - r0);
        }
    }
    arm(0);
}

/* Per-thread sources are armed by the worker itself, before the barrier. */
static int arm_for_this_thread(pid_t tid) {
    if (!strcmp(source, "perf")) return start_perf(tid);
    if (!strcmp(source, "thread")) {
        clockid_t c;
        if (pthread_getcpuclockid(pthread_self(), &c)) return -1;
        return start_posix(c, tid);
    }
    if (!strcmp(source, "mono")) return start_posix(CLOCK_MONOTONIC, tid);
    return 0;
}

static void *work(void *arg) {
    worker *w = arg;
    w->tid = (pid_t)syscall(SYS_gettid);
    if (arm_for_this_thread(w->tid)) { perror(source); exit(3); }
    pthread_barrier_wait(&ready);
    if (pairs) {
        chunks(w);
        return NULL;
    }
    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t0 = clock_s(CLOCK_MONOTONIC);
    volatile double x = 0;
    for (long i = 0; i < w->loops; i++) x += (double)i * 0.5;
    w->cpu_s = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    w->wall_s = clock_s(CLOCK_MONOTONIC) - t0;
    /* Block SIGPROF before reading the count: signals after the loop are not its cost. */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    w->received = received;
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: signal_floor none|perf|thread|itimer|tgkill|mono RATE_HZ LOOPS [THREADS [PAIRS]]\n");
        return 2;
    }
    source = argv[1];
    period_ns = 1000000000L / atol(argv[2]);
    long loops = atol(argv[3]);
    nworkers = argc >= 5 ? atoi(argv[4]) : 1;
    pairs = argc == 6 ? atoi(argv[5]) : 0;
    if (nworkers < 1 || nworkers > MAX_WORKERS) { fprintf(stderr, "THREADS: 1 or 2\n"); return 2; }
    if (pairs < 0 || (pairs && nworkers != 1)) { fprintf(stderr, "PAIRS: with one thread only\n"); return 2; }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    /* The main thread only waits: keep process-wide signals off it. */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    pthread_barrier_init(&ready, NULL, (unsigned)nworkers + 1);
    pthread_t threads[MAX_WORKERS], sampler;
    for (int i = 0; i < nworkers; i++) {
        workers[i].loops = i ? loops / 2 : loops;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        sigset_t open;
        sigemptyset(&open);
        pthread_attr_setsigmask_np(&attr, &open); /* workers take SIGPROF */
        pthread_create(&threads[i], &attr, work, &workers[i]);
    }
    pthread_barrier_wait(&ready);
    double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), t0 = clock_s(CLOCK_MONOTONIC);
    if (!strcmp(source, "itimer")) {
        if (!pairs) set_itimer(1);
    } else if (!strcmp(source, "tgkill")) {
        pthread_create(&sampler, NULL, tgkill_thread, NULL);
    }
    for (int i = 0; i < nworkers; i++) pthread_join(threads[i], NULL);
    if (pairs) return 0;
    double wall = clock_s(CLOCK_MONOTONIC) - t0, cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    printf("%.6f %.6f", wall, cpu);
    for (int i = 0; i < nworkers; i++)
        printf(" %.6f %.6f %ld", workers[i].cpu_s, workers[i].wall_s, workers[i].received);
    printf("\n");
    return 0;
}
