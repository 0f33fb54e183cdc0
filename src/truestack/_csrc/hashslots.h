/* Open addressing for the drain's caches (stackcache.c, wordcache.c): an
 * array of slots, a power of two long, each holding an entry's index + 1
 * (0: empty), over an array of entries whose first member is their
 * uint64_t hash. GIL-side only. */
#ifndef TS_HASHSLOTS_H
#define TS_HASHSLOTS_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Slots for the first n entries (each `stride` bytes) in a table of `want`
 * slots; 0, or -1 (the old slots kept) when memory ran out. */
static inline int ts_slots_rebuild(uint32_t **slots, size_t *nslots, size_t want, const void *entries, size_t n,
                                   size_t stride) {
    uint32_t *fresh = calloc(want, sizeof *fresh);
    if (!fresh) return -1;
    for (size_t j = 0; j < n; j++) {
        uint64_t h;
        memcpy(&h, (const char *)entries + j * stride, sizeof h);
        size_t i = (size_t)h & (want - 1);
        while (fresh[i]) i = (i + 1) & (want - 1);
        fresh[i] = (uint32_t)(j + 1);
    }
    free(*slots);
    *slots = fresh;
    *nslots = want;
    return 0;
}

#endif
