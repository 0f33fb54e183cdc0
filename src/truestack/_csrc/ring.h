/* Bounded multi-producer single-consumer ring of fixed-size sample slots.
 *
 * Producers are signal handlers on any thread (lock-free claim by CAS on the
 * head; a full ring drops the sample and counts it). The consumer is a
 * GIL-holding thread (drain or the code destroy hook); the GIL makes it
 * single. Each slot carries a sequence number (Vyukov's bounded queue):
 * seq == pos: free for the producer of position pos (or claimed and being
 * written once head > pos); seq == pos + 1: committed; seq == pos + 2: the
 * consumer gave up waiting for a stuck producer (abandoned); the consumer
 * hands a slot back as pos + capacity.
 *
 * A slot stores seq minus its index, so the zero pages of a fresh mapping
 * already read as "free for lap 0": only slots actually written become
 * resident, and a short run pays for the samples it took, not the ring.
 * The control thread maps the pages of the next slots ahead of the handlers
 * (ts_ring_map_ahead): a handler that claimed a slot on a page never touched
 * took two page faults (reading its sequence maps the zero page, the claim
 * copies it), ~9 us a sample on a KVM guest, 70 % of the handler's cost,
 * for every sample of the ring's first lap (at 1 kHz, its first 4 s).
 */
#ifndef TS_RING_H
#define TS_RING_H
#include "ts_common.h"

typedef struct {
    _Atomic uint64_t seq; /* minus the slot's index: see above */
    int32_t tid;
    uint16_t nframes;
    uint8_t state;
    uint8_t partial;
    uint32_t depth;
    uint32_t overrun;
    uint16_t nnative;   /* --native: return addresses kept, leaf first (ts_slot_ips) */
    uint8_t nsegs;      /* --native: eval-call boundaries kept (ts_slot_segs) */
    uint8_t native_why; /* --native: TS_NATIVE_* */
    int64_t time_ns;
    int64_t weight_ns;
    int64_t cpu_delta_ns;
    uint64_t coro; /* ts_walk_result.coro */
    ts_rawframe frames[];
} ts_slot;

/* The tid of a committed slot that holds no sample (a remote walk found the
 * thread had run): the consumer skips it without reading its frames. */
#define TS_VOID_TID 0

typedef struct {
    _Atomic uint64_t head;
    char pad[56];
    uint64_t tail;
    uint64_t capacity; /* power of two */
    uint64_t slot_size;
    int max_frames;
    int max_native;    /* 0 unless --native: then each slot also holds these arrays */
    uint64_t ips_off;  /* offset of the uint64_t ips[max_native] in a slot */
    uint64_t segs_off; /* offset of the uint16_t segs[TS_MAX_SEGS] */
    char *mem;
    size_t mem_size;
} ts_ring;

extern ts_ring ts_R;

/* Eval-loop C calls whose frames a --native sample can interleave. */
#define TS_MAX_SEGS 128
int ts_ring_init(uint64_t capacity, int max_frames, int max_native); /* GIL held, not running */
void ts_ring_free(void);
void ts_ring_reset_after_fork(void);
/* Control thread: maps the pages of the `slots` slots after the head, those
 * of the first lap not mapped yet; returns the pages it mapped. */
uint64_t ts_ring_map_ahead(uint64_t slots);

static inline ts_slot *ts_ring_slot(uint64_t pos) {
    return (ts_slot *)(ts_R.mem + (pos & (ts_R.capacity - 1)) * ts_R.slot_size);
}

static inline uint64_t *ts_slot_ips(ts_slot *s) { return (uint64_t *)((char *)s + ts_R.ips_off); }
static inline uint16_t *ts_slot_segs(ts_slot *s) { return (uint16_t *)((char *)s + ts_R.segs_off); }

TS_HIDDEN_BEGIN
/* Claims a slot (NULL when full) and publishes it. */
TS_SIGNAL_SAFE ts_slot *ts_ring_claim(uint64_t *pos);
/* Publishes a claimed slot; returns 0 if the consumer abandoned it meanwhile
 * (the sample is lost and the slot handed back for the next lap). */
TS_SIGNAL_SAFE int ts_ring_commit(ts_slot *s, uint64_t pos);
TS_HIDDEN_END

/* Consumer side: the next committed slot before position `end` (TS_RING_ALL:
 * no bound), or NULL. With wait_busy, waits up to TS_RING_STUCK_NS for an
 * in-progress slot, then abandons it (counted in ts_ring_abandoned) and goes
 * on with the next one. */
#define TS_RING_STUCK_NS 2000000
#define TS_RING_ALL      UINT64_MAX
extern _Atomic uint64_t ts_ring_abandoned;
ts_slot *ts_ring_peek(int wait_busy, uint64_t end);
void ts_ring_release(ts_slot *s);

/* Consumer side (GIL held): may a pending (not yet folded) slot hold `code`?
 * 0 means none does, proven from an index of the code pointers of the
 * committed slots, built as slots arrive (each slot is indexed once, so the
 * destroy hook costs O(1) per dying code object plus O(frames) per sample).
 * 1 means one does, or a slot is still being written, or the index is full:
 * the caller folds. A slot claimed after this call cannot hold a code object
 * that is already dying: the walk that fills it starts after the claim. */
int ts_ring_may_hold(const void *code);
#endif
