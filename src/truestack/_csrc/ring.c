#include "ring.h"
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

ts_ring ts_R;
_Atomic uint64_t ts_ring_abandoned;

/* The index of ts_ring_may_hold(): the code pointers of slots [idx_tail,
 * idx_end), valid while the consumer's tail is still idx_tail (open
 * addressing, never more than half full). */
#define TS_IDX_CAP 4096
static const void *idx_tab[TS_IDX_CAP];
static unsigned idx_n;
static uint64_t idx_tail, idx_end;

static void idx_reset(void) {
    if (idx_n) memset((void *)idx_tab, 0, sizeof idx_tab);
    idx_n = 0;
    idx_tail = idx_end = ts_R.tail;
}

static unsigned idx_hash(const void *p) {
    return (unsigned)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ULL >> 40) & (TS_IDX_CAP - 1);
}

/* 0 when the index is full. */
static int idx_add(const void *p) {
    unsigned h = idx_hash(p);
    while (idx_tab[h]) {
        if (idx_tab[h] == p) return 1;
        h = (h + 1) & (TS_IDX_CAP - 1);
    }
    if (idx_n * 2 >= TS_IDX_CAP) return 0;
    idx_tab[h] = p;
    idx_n++;
    return 1;
}

static int idx_has(const void *p) {
    for (unsigned h = idx_hash(p); idx_tab[h]; h = (h + 1) & (TS_IDX_CAP - 1))
        if (idx_tab[h] == p) return 1;
    return 0;
}

/* Slots store seq - index (ring.h): these convert. */
TS_SIGNAL_SAFE static inline uint64_t seq_of(ts_slot *s, uint64_t pos) {
    return atomic_load_explicit(&s->seq, memory_order_acquire) + (pos & (ts_R.capacity - 1));
}
TS_SIGNAL_SAFE static inline uint64_t stored(uint64_t seq, uint64_t pos) { return seq - (pos & (ts_R.capacity - 1)); }

/* Slots [0, mapped_to) of the first lap have their pages mapped (ts_ring_map_ahead,
 * control thread only; reset while no control thread runs). */
static uint64_t mapped_to;
enum { MAP_POPULATE_WRITE_OK, MAP_BY_TOUCH, MAP_GIVEN_UP };
static int map_how;

static void *map_zeroed(size_t size) {
    void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return mem == MAP_FAILED ? NULL : mem;
}

int ts_ring_init(uint64_t capacity, int max_frames, int max_native) {
    uint64_t cap = 1;
    while (cap < capacity) cap <<= 1;
    /* The native arrays exist only when asked for: the default slot stays small. */
    uint64_t slot_size = sizeof(ts_slot) + (uint64_t)max_frames * sizeof(ts_rawframe);
    uint64_t ips_off = (slot_size + 7) & ~(uint64_t)7, segs_off = ips_off + (uint64_t)max_native * sizeof(uint64_t);
    if (max_native) slot_size = segs_off + TS_MAX_SEGS * sizeof(uint16_t);
    slot_size = (slot_size + 63) & ~(uint64_t)63;
    ts_R.ips_off = ips_off;
    ts_R.segs_off = segs_off;
    ts_R.max_native = max_native;
    if (ts_R.mem && ts_R.capacity == cap && ts_R.slot_size == slot_size) {
        return 0; /* reuse: keeps any undrained samples */
    }
    ts_ring_free();
    size_t size = (size_t)(cap * slot_size);
    void *mem = map_zeroed(size);
    if (!mem) return -1;
    ts_R.mem = mem;
    ts_R.mem_size = size;
    ts_R.capacity = cap;
    ts_R.slot_size = slot_size;
    ts_R.max_frames = max_frames;
    ts_R.tail = 0;
    atomic_store(&ts_R.head, 0);
    mapped_to = 0;
    idx_reset();
    return 0;
}

void ts_ring_free(void) {
    if (ts_R.mem) munmap(ts_R.mem, ts_R.mem_size);
    ts_R.mem = NULL;
    ts_R.capacity = 0;
    idx_reset();
}

void ts_ring_reset_after_fork(void) {
    /* Slots claimed by parent threads will never be committed here: start
     * over on fresh zero pages (which also gives back the parent's). */
    if (!ts_R.mem) return;
    void *mem = mmap(ts_R.mem, ts_R.mem_size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    if (mem == MAP_FAILED) memset(ts_R.mem, 0, ts_R.mem_size);
    ts_R.tail = 0;
    atomic_store(&ts_R.head, 0);
    mapped_to = 0;
    idx_reset();
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

uint64_t ts_ring_map_ahead(uint64_t slots) {
    if (!ts_R.mem || map_how == MAP_GIVEN_UP) return 0;
    uint64_t head = atomic_load_explicit(&ts_R.head, memory_order_relaxed);
    /* A later lap finds every page the first one touched. */
    uint64_t from = mapped_to > head ? mapped_to : head, to = head + slots;
    if (to > ts_R.capacity) to = ts_R.capacity;
    if (from >= to) return 0;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = ((uintptr_t)ts_R.mem + from * ts_R.slot_size) & ~(page - 1);
    uintptr_t end = ((uintptr_t)ts_R.mem + to * ts_R.slot_size + page - 1) & ~(page - 1);
    if (end > (uintptr_t)ts_R.mem + ts_R.mem_size) end = (uintptr_t)ts_R.mem + ts_R.mem_size;
    if (map_how == MAP_POPULATE_WRITE_OK && madvise((void *)start, end - start, MADV_POPULATE_WRITE) != 0)
        map_how = errno == EINVAL ? MAP_BY_TOUCH : MAP_GIVEN_UP; /* an older kernel; or no memory left */
    if (map_how == MAP_BY_TOUCH) {
        /* Adding 0 to a slot's sequence writes its page without changing it, even
         * while a handler claims that slot (only the header's page, where most
         * samples' frames end). */
        for (uint64_t pos = from; pos < to; pos++)
            atomic_fetch_add_explicit(&ts_ring_slot(pos)->seq, 0, memory_order_relaxed);
    }
    if (map_how == MAP_GIVEN_UP) return 0;
    mapped_to = to;
    return (end - start) / page;
}

TS_SIGNAL_SAFE ts_slot *ts_ring_claim(uint64_t *out_pos) {
    if (!ts_R.mem) return NULL;
    uint64_t pos = atomic_load_explicit(&ts_R.head, memory_order_relaxed);
    for (;;) {
        ts_slot *s = ts_ring_slot(pos);
        int64_t dif = (int64_t)(seq_of(s, pos) - pos);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&ts_R.head, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                *out_pos = pos;
                return s;
            }
        } else if (dif < 0) {
            return NULL; /* full, or a stuck slot of the previous lap */
        } else {
            pos = atomic_load_explicit(&ts_R.head, memory_order_relaxed);
        }
    }
}

TS_SIGNAL_SAFE int ts_ring_commit(ts_slot *s, uint64_t pos) {
    uint64_t expect = stored(pos, pos);
    if (atomic_compare_exchange_strong_explicit(&s->seq, &expect, stored(pos + 1, pos), memory_order_release,
                                                memory_order_relaxed))
        return 1;
    /* Abandoned by the consumer while we wrote it: hand it to the next lap. */
    atomic_store_explicit(&s->seq, stored(pos + ts_R.capacity, pos), memory_order_release);
    return 0;
}

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

ts_slot *ts_ring_peek(int wait_busy, uint64_t end) {
    if (!ts_R.mem) return NULL;
    for (;;) {
        uint64_t pos = ts_R.tail;
        if (pos >= end) return NULL;
        ts_slot *s = ts_ring_slot(pos);
        int64_t deadline = 0;
        for (int spins = 0;; spins++) {
            uint64_t seq = seq_of(s, pos);
            if (seq == pos + 1) return s;
            /* Empty, or claimed and still being written by a handler. */
            if (!wait_busy || atomic_load_explicit(&ts_R.head, memory_order_relaxed) == pos) return NULL;
            /* The writer is a signal handler on another thread (this thread's
             * own handler always finishes before we resume): it finishes in
             * microseconds unless that thread is descheduled or stopped. Wait
             * a bounded time with the GIL held, then abandon the slot: the
             * writer's commit will see it and drop its sample. */
            if (spins == 64) deadline = mono_ns() + TS_RING_STUCK_NS;
            if (spins > 64 && mono_ns() > deadline) break;
            if (spins > 64) {
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
            } else {
                sched_yield();
            }
        }
        uint64_t expect = stored(pos, pos);
        if (atomic_compare_exchange_strong_explicit(&s->seq, &expect, stored(pos + 2, pos), memory_order_acq_rel,
                                                    memory_order_acquire)) {
            atomic_fetch_add(&ts_ring_abandoned, 1);
            ts_R.tail++;
            continue;
        }
        /* Committed at the last moment: take it. */
    }
}

void ts_ring_release(ts_slot *s) {
    atomic_store_explicit(&s->seq, stored(ts_R.tail + ts_R.capacity, ts_R.tail), memory_order_release);
    ts_R.tail++;
}

int ts_ring_may_hold(const void *code) {
    if (!ts_R.mem) return 0;
    uint64_t head = atomic_load_explicit(&ts_R.head, memory_order_acquire);
    if (head == ts_R.tail) return 0;
    /* The tail moved (slots folded, drained or abandoned): start over. */
    if (idx_tail != ts_R.tail || idx_end < ts_R.tail || idx_end > head) idx_reset();
    for (; idx_end != head; idx_end++) {
        ts_slot *s = ts_ring_slot(idx_end);
        if (seq_of(s, idx_end) != idx_end + 1) return 1; /* still being written: its frames are unknown */
        for (uint32_t i = 0; i < s->nframes; i++)
            if (!idx_add(s->frames[i].code)) return 1;
    }
    return idx_has(code);
}
