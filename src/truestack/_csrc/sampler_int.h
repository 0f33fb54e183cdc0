/* Internals shared by the sampling core's files: sampler.c (registry and
 * the SIGPROF handler), timers.c (per-thread CPU timers) and control.c (the
 * control thread: wall ticks, remote walks of blocked threads, CPU budget).
 * Not for the Python interface, which uses sampler.h. */
#ifndef TS_SAMPLER_INT_H
#define TS_SAMPLER_INT_H
#include "ring.h"
#include "sampler.h"
#include "walker.h"
#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <time.h>

#define TS_COOKIE              ((void *)0x7472756573746b21ULL) /* "truestk!" */
/* The control thread's name (its /proc comm, 15 characters at most): remote/signal_sources.py looks for it. */
#define TS_CONTROL_THREAD_NAME "truestack-ctl"

typedef struct {
    _Atomic int tid;     /* 0 = free slot */
    void *tstate;        /* its PyThreadState (remote walks) */
    unsigned long ident; /* tstate->thread_id when registered: proves tstate is still this thread's */
    int perf_fd;
    uint64_t perf_id; /* the kernel's id of the event perf_fd was opened for (ts_perf_fd_is_ours) */
    int perf_lost;    /* the program closed perf_fd: ts_rearm_lost_timers arms the thread again */
    int has_timer;
    timer_t timer;
    _Atomic int dead;    /* the kernel said the tid is gone: never signalled again */
    _Atomic int unarmed; /* cpu mode: no timer could be armed, the thread is not sampled */
    _Atomic int64_t last_cpu_ns;
    _Atomic int sampled; /* has had a sample: last_cpu_ns is a real baseline */
    /* Wall mode: wall time the control thread accounted for the thread, and
     * the part its samples already stand for. Signals coalesce while a
     * thread waits for a CPU, so a sample weighs all time since the last. */
    _Atomic uint64_t sent_ns, seen_ns;
    int64_t ctl_cpu_ns; /* the control thread's previous read of its CPU clock */
} ts_thread;

extern ts_thread ts_threads[TS_MAX_THREADS];
extern _Atomic int ts_threads_hwm;
extern pthread_mutex_t ts_reg_lock;
extern pid_t ts_pid;
extern int ts_timer_kind;
extern _Atomic int ts_active;
extern int ts_max_frames;
extern int ts_max_native; /* 0 unless --native */
extern int64_t ts_requested_interval_ns;
extern unsigned long ts_tstate_ident_off; /* offsetof(PyThreadState, thread_id) */

TS_HIDDEN_BEGIN
TS_SIGNAL_SAFE int64_t ts_now_ns(clockid_t clk);
/* A sample of a blocked thread, walked by the control thread. The slot is
 * claimed before the walk, as the handler claims it: the destroy hook of a
 * code object the walk reads then finds the slot being written and waits
 * for it, so no code object can die and be reused unseen between the walk
 * and the sample. Claim (NULL: ring full, counted as dropped), walk into
 * the slot's frames, then publish it (the walked frames held at now_ns,
 * while the thread's CPU clock stood at cpu_ns; ran: it ran at least half
 * the last interval before it stopped, so the sample is a running one) or
 * void it (the thread ran meanwhile: the consumer skips it). */
TS_SIGNAL_SAFE ts_slot *ts_remote_claim(uint64_t *pos);
TS_SIGNAL_SAFE void ts_remote_publish(ts_thread *t, int tid, ts_slot *s, uint64_t pos, const ts_walk_result *walk,
                                      int64_t cpu_ns, int64_t now_ns, int ran);
TS_SIGNAL_SAFE void ts_remote_void(ts_slot *s, uint64_t pos);
TS_HIDDEN_END

static inline clockid_t ts_thread_cpu_clock(int tid) {
    /* MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED): any thread of the process
     * can read or arm another thread's CPU clock by tid. */
    return (clockid_t)((~(unsigned)tid << 3) | 6);
}

/* The siginfo of our own SIGPROF sent with rt_tgsigqueueinfo (is_ours() knows it). */
siginfo_t ts_own_siginfo(void);

/* Is tid a live thread of this process? (tgkill with signal 0 checks both.) */
int ts_tid_is_ours(int tid);

/* timers.c: arm/disarm one thread's CPU timer (cpu mode), reg_lock held. */
int ts_timers_probe(int64_t interval_ns, int pref);
int ts_arm(ts_thread *t, int tid);
void ts_disarm(ts_thread *t);
int ts_perf_fd_is_ours(ts_thread *t);
void ts_rearm_all(int64_t interval_ns); /* new period for every armed thread */
#ifdef TS_TEST_HOOKS
void ts_pause_all(int paused); /* every timer stopped, or started again where it was */
#endif

/* control.c */
int ts_control_start(void);
void ts_control_stop(void);
void ts_control_after_fork(void);
#endif
