#include "ring.h"
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

ts_ring ts_R;

int ts_ring_init(uint64_t capacity, int max_frames) {
    uint64_t cap = 1;
    while (cap < capacity) cap <<= 1;
    uint64_t slot_size = sizeof(ts_slot) + (uint64_t)max_frames * sizeof(ts_rawframe);
    slot_size = (slot_size + 63) & ~(uint64_t)63;
    if (ts_R.mem && ts_R.capacity == cap && ts_R.slot_size == slot_size) {
        return 0; /* reuse: keeps any undrained samples */
    }
    ts_ring_free();
    size_t size = (size_t)(cap * slot_size);
    /* Lazily committed: only the slots actually written cost memory. */
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return -1;
    ts_R.mem = mem;
    ts_R.mem_size = size;
    ts_R.capacity = cap;
    ts_R.slot_size = slot_size;
    ts_R.max_frames = max_frames;
    for (uint64_t i = 0; i < cap; i++) atomic_store_explicit(&ts_ring_slot(i)->seq, i, memory_order_relaxed);
    ts_R.tail = 0;
    atomic_store(&ts_R.head, 0);
    return 0;
}

void ts_ring_free(void) {
    if (ts_R.mem) munmap(ts_R.mem, ts_R.mem_size);
    ts_R.mem = NULL;
    ts_R.capacity = 0;
}

void ts_ring_reset_after_fork(void) {
    /* Slots claimed by parent threads will never be committed here. */
    if (!ts_R.mem) return;
    for (uint64_t i = 0; i < ts_R.capacity; i++) atomic_store_explicit(&ts_ring_slot(i)->seq, i, memory_order_relaxed);
    ts_R.tail = 0;
    atomic_store(&ts_R.head, 0);
}

TS_SIGNAL_SAFE ts_slot *ts_ring_claim(uint64_t *out_pos) {
    if (!ts_R.mem) return NULL;
    uint64_t pos = atomic_load_explicit(&ts_R.head, memory_order_relaxed);
    for (;;) {
        ts_slot *s = ts_ring_slot(pos);
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - pos);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&ts_R.head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *out_pos = pos;
                return s;
            }
        } else if (dif < 0) {
            return NULL; /* full */
        } else {
            pos = atomic_load_explicit(&ts_R.head, memory_order_relaxed);
        }
    }
}

TS_SIGNAL_SAFE void ts_ring_commit(ts_slot *s, uint64_t pos) {
    atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
}

ts_slot *ts_ring_peek(int wait_busy) {
    if (!ts_R.mem) return NULL;
    uint64_t pos = ts_R.tail;
    ts_slot *s = ts_ring_slot(pos);
    for (int spins = 0;; spins++) {
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (seq == pos + 1) return s;
        /* Empty, or claimed and still being written by a handler. */
        if (!wait_busy || atomic_load_explicit(&ts_R.head, memory_order_relaxed) == pos) return NULL;
        /* The writer is a signal handler on another thread (this thread's
         * own handler always finishes before we resume): it finishes in
         * microseconds unless that thread is descheduled or stopped, so
         * wait up to ~1 s, then give up rather than hang. */
        if (spins > 100000) return NULL;
        if (spins > 100) {
            struct timespec ts = {0, 10000};
            nanosleep(&ts, NULL);
        } else {
            sched_yield();
        }
    }
}

void ts_ring_release(ts_slot *s) {
    atomic_store_explicit(&s->seq, ts_R.tail + ts_R.capacity, memory_order_release);
    ts_R.tail++;
}
