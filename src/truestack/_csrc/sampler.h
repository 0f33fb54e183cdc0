/* Sampling core: thread registry, timers (perf_event / timer_create / wall
 * sampler thread) and the SIGPROF handler that feeds the ring. */
#ifndef TS_SAMPLER_H
#define TS_SAMPLER_H
#include "ts_common.h"

enum { TS_MODE_CPU = 0, TS_MODE_WALL = 1 };
enum { TS_TIMER_NONE = 0, TS_TIMER_PERF = 1, TS_TIMER_POSIX = 2, TS_TIMER_THREAD = 3 };

typedef struct {
    _Atomic uint64_t signals, samples, dropped, foreign, late, overruns, ticks, wakeups;
    _Atomic uint64_t weight_ns; /* sum of sample weights */
    _Atomic uint64_t partial[TS_NREASONS];
    _Atomic uint64_t settle_timeouts; /* destroy hook gave up waiting on a slot */
} ts_counters;
extern ts_counters ts_C;

/* Everything below runs with the GIL held. Return 0 or -errno. */
int ts_sampler_start(int mode, int64_t interval_ns, int max_frames, uint64_t ring_slots, int timer_pref);
int ts_sampler_stop(void);
int ts_sampler_active(void);
int ts_sampler_timer(void);
int ts_register_thread(int tid); /* idempotent */
int ts_unregister_thread(int tid);
int ts_thread_count(void);
int ts_thread_tids(int *out, int max);
int ts_thread_is_dead(int tid); /* wall sampler saw ESRCH */
extern int ts_forked_child;     /* set in a fork child: sampling stopped there */
extern int64_t ts_interval_ns;
extern int ts_mode;
const char *ts_timer_name(int timer);
#endif
