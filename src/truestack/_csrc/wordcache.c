/* The drain's word-array cache (see wordcache.h). GIL-side only. */
#include "wordcache.h"
#include "hashslots.h"
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what the cache holds; reaching one empties it (the chains still
 * sampled come back within a drain). */
#define MAX_TUPLES 32768u
#define MAX_WORDS  (1u << 19)

typedef struct {
    uint64_t hash;
    size_t first; /* into words */
    size_t n;
    PyObject *tuple; /* strong ref */
} entry;

static entry *entries;
static size_t nentries, cap_entries;
static uint64_t *words;
static size_t nwords, cap_words;
static uint32_t *slots; /* open addressing: entry index + 1, 0 = empty */
static size_t nslots;   /* a power of two, or 0 */

static uint64_t words_hash(const uint64_t *w, size_t n) {
    uint64_t h = 0x84222325cbf29ce4ull ^ n;
    for (size_t i = 0; i < n; i++) {
        h ^= w[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
        h *= 0xff51afd7ed558ccdull;
    }
    return h;
}

static PyObject *new_tuple(const uint64_t *w, size_t n) {
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong((unsigned long long)w[i]);
        if (!v)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, (Py_ssize_t)i, v);
    }
    return t;
}

static int rehash(size_t want) {
    _Static_assert(offsetof(entry, hash) == 0, "ts_slots_rebuild reads the hash first");
    return ts_slots_rebuild(&slots, &nslots, want, entries, nentries, sizeof *entries);
}

/* Room for one more entry of n words; 0, or -1 when memory ran out (the
 * tuple is then handed over uncached). */
static int reserve(size_t n) {
    if (nentries >= MAX_TUPLES || nwords + n > MAX_WORDS) ts_wordcache_clear();
    if (nentries == cap_entries) {
        size_t cap = cap_entries ? cap_entries * 2 : 256;
        entry *grown = realloc(entries, cap * sizeof *grown);
        if (!grown) return -1;
        entries = grown, cap_entries = cap;
    }
    if (nwords + n > cap_words) {
        size_t cap = cap_words ? cap_words : 4096;
        while (cap < nwords + n) cap *= 2;
        uint64_t *grown = realloc(words, cap * sizeof *grown);
        if (!grown) return -1;
        words = grown, cap_words = cap;
    }
    if ((nentries + 1) * 2 > nslots && rehash(nslots ? nslots * 2 : 1024) != 0) return -1;
    return 0;
}

PyObject *ts_wordcache_tuple(const uint64_t *w, size_t n) {
    if (n == 0) return PyTuple_New(0); /* w may then be NULL, which memcmp and memcpy must never see */
    uint64_t h = words_hash(w, n);
    if (nslots) {
        for (size_t i = (size_t)h & (nslots - 1); slots[i]; i = (i + 1) & (nslots - 1)) {
            entry *e = &entries[slots[i] - 1];
            if (e->hash == h && e->n == n && memcmp(words + e->first, w, n * sizeof *w) == 0) {
                return Py_NewRef(e->tuple);
            }
        }
    }
    PyObject *t = new_tuple(w, n);
    if (!t || reserve(n) != 0) return t; /* uncached: still right, only slower */
    memcpy(words + nwords, w, n * sizeof *w);
    entries[nentries] = (entry){h, nwords, n, Py_NewRef(t)};
    nwords += n;
    size_t i = (size_t)h & (nslots - 1);
    while (slots[i]) i = (i + 1) & (nslots - 1);
    slots[i] = (uint32_t)(++nentries);
    return t;
}

void ts_wordcache_clear(void) {
    for (size_t j = 0; j < nentries; j++) Py_CLEAR(entries[j].tuple);
    nentries = nwords = 0;
    if (slots) memset(slots, 0, nslots * sizeof *slots);
}
