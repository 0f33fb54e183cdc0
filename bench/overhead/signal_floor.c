/* The kernel's share of a sampling profiler's cost: a fixed busy loop run
 * with no signals, then with SIGPROF delivered at a rate to a handler that
 * does nothing, from each source truestack uses (perf_event task-clock per
 * thread; tgkill from a sampler thread, as in wall mode).
 *
 *   signal_floor SOURCE RATE_HZ LOOPS   SOURCE: none | perf | thread
 * prints: <seconds of the loop> <signals received>
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
#include <time.h>
#include <unistd.h>

static volatile long received;
static pid_t target;
static long period_ns;

static void on_sigprof(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)si; (void)uc;
    received++;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *signal_thread(void *arg) {
    (void)arg;
    struct timespec ts = {period_ns / 1000000000L, period_ns % 1000000000L};
    for (;;) {
        nanosleep(&ts, NULL);
        syscall(SYS_tgkill, getpid(), target, SIGPROF);
    }
    return NULL;
}

static int start_perf(void) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.sample_period = (unsigned long long)period_ns;
    a.wakeup_events = 1;
    a.disabled = 1;
    int fd = (int)syscall(SYS_perf_event_open, &a, target, -1, -1, 0);
    if (fd < 0) return -1;
    struct f_owner_ex owner = {F_OWNER_TID, target};
    if (fcntl(fd, F_SETOWN_EX, &owner) || fcntl(fd, F_SETSIG, SIGPROF) ||
        fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0))
        return -1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: signal_floor none|perf|thread RATE_HZ LOOPS\n");
        return 2;
    }
    const char *source = argv[1];
    period_ns = 1000000000L / atol(argv[2]);
    long loops = atol(argv[3]);
    target = (pid_t)syscall(SYS_gettid);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    if (!strcmp(source, "perf")) {
        if (start_perf() != 0) { perror("perf_event_open"); return 3; }
    } else if (!strcmp(source, "thread")) {
        pthread_t t;
        pthread_create(&t, NULL, signal_thread, NULL);
    }
    double t0 = now();
    volatile double x = 0;
    for (long i = 0; i < loops; i++) x += (double)i * 0.5;
    printf("%.6f %ld\n", now() - t0, received);
    return 0;
}
