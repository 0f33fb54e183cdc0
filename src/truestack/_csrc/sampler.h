/* Sampling core: thread registry, timers (perf_event / timer_create / the
 * control thread's wall ticks) and the SIGPROF handler that feeds the ring. */
#ifndef TS_SAMPLER_H
#define TS_SAMPLER_H
#include "ts_common.h"

enum { TS_MODE_CPU = 0, TS_MODE_WALL = 1 };
enum { TS_TIMER_NONE = 0, TS_TIMER_PERF = 1, TS_TIMER_POSIX = 2, TS_TIMER_THREAD = 3 };

typedef struct {
    _Atomic uint64_t signals, samples, dropped, foreign, late, overruns, ticks, wakeups;
    _Atomic uint64_t weight_ns; /* sum of sample weights */
    _Atomic uint64_t partial[TS_NREASONS];
    _Atomic uint64_t handler_ns;        /* time spent inside our SIGPROF handler */
    _Atomic uint64_t remote_samples;    /* wall: blocked threads walked by the control thread */
    _Atomic uint64_t remote_discarded;  /* ... whose walk was dropped because the thread ran meanwhile */
    _Atomic uint64_t stale;             /* wall: signals delivered after a remote walk took their time */
    _Atomic uint64_t rate_lowered;      /* times the CPU budget halved the rate */
    _Atomic uint64_t timer_fallbacks;   /* threads given a POSIX timer because no perf fd was left */
    _Atomic uint64_t timer_fds_lost;    /* perf fds the program closed (ts_perf_fd_is_ours) */
    _Atomic uint64_t timer_fds_rearmed; /* ... and the threads armed again (ts_rearm_lost_timers) */
    _Atomic uint64_t collector_ns; /* CPU time of the collector: drains, the profile and stream, wake-ups (reported) */
    _Atomic uint64_t control_ns;   /* CPU time of the control thread (ticks, remote walks, budget, ring pages) */
    _Atomic uint64_t ring_pages_mapped; /* ring pages the control thread mapped ahead of the handlers */
} ts_counters;
extern ts_counters ts_C;

/* Everything below runs with the GIL held. Return 0 or -errno. */
/* native: return addresses kept per sample (--native), 0 for none. */
int ts_sampler_start(int mode, int64_t interval_ns, int max_frames, int native, uint64_t ring_slots, int timer_pref);
int ts_sampler_stop(void); /* returns once no handler is running any more */
int ts_sampler_active(void);
int ts_sampler_timer(void);
int ts_timers_warm(void); /* see timers.c; not for the signal handler */
/* Registers a live thread of this process (idempotent; -ESRCH if tid is not
 * one). tstate/ident let the control thread walk it while it is blocked. */
int ts_register_thread(int tid, void *tstate, unsigned long ident);
int ts_unregister_thread(int tid);
void ts_rearm_lost_timers(void);
int ts_thread_count(void);
int ts_thread_tids(int *out, int max, int only_unarmed);
#ifdef TS_TEST_HOOKS
int ts_test_register_stale(int tid);
/* Test builds: is SIGPROF blocked in the thread while it holds the registry lock, taken as
 * registration takes it? */
int ts_test_registry_lock_blocks_sigprof(void);
/* Test builds: change every timer's period, as the CPU budget does. */
void ts_test_change_period(int64_t interval_ns);
/* Test builds: ns the control thread pauses between finding a walked
 * blocked thread stood still and publishing its sample (0: none). */
extern _Atomic int64_t ts_test_remote_pause_ns;
/* Test builds: while set, wall mode's control thread lets its ticks pass unsignalled. */
extern _Atomic int ts_test_ticks_paused;
#endif
extern int ts_forked_child;            /* set in a fork child: sampling stopped there */
extern _Atomic int64_t ts_interval_ns; /* current: the CPU budget may lower the rate */
extern int64_t ts_requested_interval_ns;
extern int64_t ts_max_interval_ns; /* the lowest rate the budget went down to */
extern int64_t ts_delivery_ns;     /* measured CPU cost of one signal's delivery */
extern int ts_mode;
const char *ts_timer_name(int timer);
#endif
