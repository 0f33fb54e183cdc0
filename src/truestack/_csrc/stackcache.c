/* The drain's stack cache (see stackcache.h). GIL-side only: nothing here
 * is reachable from the signal handler. */
#include "stackcache.h"
#include "hashslots.h"
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Bounds on what the cache pins; reaching one empties it (the stacks still
 * sampled come back within a drain or two). */
#define MAX_STACKS 16384u
#define MAX_FRAMES (1u << 20)

typedef struct {
    PyObject *code; /* strong ref: the cache pins its keys */
    int32_t off;
} key_frame;

typedef struct {
    uint64_t hash;
    size_t first; /* into frames */
    uint32_t nframes, depth;
    uint8_t partial, shims;
    PyObject *value; /* strong ref: what resolve() made of it */
} entry;

static entry *entries;
static size_t nentries, cap_entries;
static key_frame *frames;
static size_t nframes_used, cap_frames;
static uint32_t *slots; /* open addressing: entry index + 1, 0 = empty */
static size_t nslots;   /* a power of two, or 0 */
static uint64_t hits, misses, uncached;

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t key_hash(const ts_staging *st, const ts_ssample *s, int shims) {
    uint64_t h = mix(mix(mix(0x84222325cbf29ce4ull, s->partial), s->depth), (uint64_t)shims);
    for (uint32_t i = 0; i < s->nframes; i++) {
        const ts_sframe *f = &st->frames[s->first + i];
        h = mix(mix(h, (uint64_t)(uintptr_t)f->obj), (uint64_t)(uint32_t)f->off);
    }
    return h;
}

static int same_key(const entry *e, uint64_t h, const ts_staging *st, const ts_ssample *s, int shims) {
    if (e->hash != h || e->nframes != s->nframes || e->depth != s->depth || e->partial != s->partial ||
        e->shims != shims)
        return 0;
    for (uint32_t i = 0; i < s->nframes; i++) {
        const ts_sframe *f = &st->frames[s->first + i];
        const key_frame *k = &frames[e->first + i];
        if (k->code != f->obj || k->off != f->off) return 0;
    }
    return 1;
}

static size_t *probe(uint64_t h, const ts_staging *st, const ts_ssample *s, int shims, entry **found) {
    *found = NULL;
    if (!nslots) return NULL;
    size_t mask = nslots - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        if (!slots[i]) return (size_t *)(uintptr_t)(i + 1); /* where it would go (+1: never NULL) */
        entry *e = &entries[slots[i] - 1];
        if (same_key(e, h, st, s, shims)) {
            *found = e;
            return NULL;
        }
    }
}

static int rehash(size_t want) {
    _Static_assert(offsetof(entry, hash) == 0, "ts_slots_rebuild reads the hash first");
    return ts_slots_rebuild(&slots, &nslots, want, entries, nentries, sizeof *entries);
}

static int reserve(uint32_t n) {
    if (nentries + 1 > cap_entries) {
        size_t c = cap_entries ? cap_entries * 2 : 256;
        entry *p = realloc(entries, c * sizeof *p);
        if (!p) return -1;
        entries = p;
        cap_entries = c;
    }
    if (nframes_used + n > cap_frames) {
        size_t c = cap_frames ? cap_frames : 4096;
        while (c < nframes_used + n) c *= 2;
        key_frame *p = realloc(frames, c * sizeof *p);
        if (!p) return -1;
        frames = p;
        cap_frames = c;
    }
    if ((nentries + 1) * 2 > nslots) return rehash(nslots ? nslots * 2 : 512);
    return 0;
}

/* -- frames: (code, offset) -> the resolved frame, or None (a shim) ------ */

typedef struct {
    PyObject *code; /* strong ref (pinned), NULL = empty */
    int32_t off;
    PyObject *frame; /* strong ref */
} frame_slot;

/* Every code object the stacks pin is pinned here too (a stack's frames are
 * resolved through this cache, and both are emptied together), so this
 * bounds the code objects kept alive: about what the Python-side cache
 * pinned before (20,000). */
#define MAX_CACHED_FRAMES 32768u
static frame_slot *fslots;
static size_t nfslots, nfused;

static size_t frame_index(PyObject *code, int32_t off, size_t cap) {
    return (size_t)mix(mix(0x27d4eb2f165667c5ull, (uint64_t)(uintptr_t)code), (uint64_t)(uint32_t)off) & (cap - 1);
}

static void clear_frames(void) {
    frame_slot *old = fslots;
    size_t n = nfslots;
    fslots = NULL;
    nfslots = nfused = 0;
    for (size_t i = 0; i < n; i++) {
        if (!old[i].code) continue;
        Py_DECREF(old[i].frame);
        Py_DECREF(old[i].code);
    }
    free(old);
}

static int grow_frames(void) {
    size_t want = nfslots ? nfslots * 2 : 1024;
    frame_slot *fresh = calloc(want, sizeof *fresh);
    if (!fresh) return -1;
    for (size_t j = 0; j < nfslots; j++) {
        if (!fslots[j].code) continue;
        size_t i = frame_index(fslots[j].code, fslots[j].off, want);
        while (fresh[i].code) i = (i + 1) & (want - 1);
        fresh[i] = fslots[j];
    }
    free(fslots);
    fslots = fresh;
    nfslots = want;
    return 0;
}

/* The resolved frame of a staged frame: borrowed from the frame cache, or
 * a new reference in *owned (a frame of a dead code, or no memory). */
static PyObject *frame_of(const ts_sframe *f, PyObject *resolve_frame, PyObject **owned) {
    *owned = NULL;
    if (f->kind & TS_KIND_RESOLVED) /* its code died: (qualname, file, firstlineno), line */
        return *owned = PyObject_CallFunction(resolve_frame, "Oi", f->obj, (int)f->off);
    if (nfslots) {
        for (size_t i = frame_index(f->obj, f->off, nfslots); fslots[i].code; i = (i + 1) & (nfslots - 1))
            if (fslots[i].code == f->obj && fslots[i].off == f->off) return fslots[i].frame;
    }
    PyObject *frame = PyObject_CallFunction(resolve_frame, "Oi", f->obj, (int)f->off);
    if (!frame) return NULL;
    if (nfused >= MAX_CACHED_FRAMES) ts_stackcache_clear();
    if ((nfused + 1) * 2 > nfslots && grow_frames() < 0) return *owned = frame;
    size_t i = frame_index(f->obj, f->off, nfslots);
    while (fslots[i].code) i = (i + 1) & (nfslots - 1);
    fslots[i] = (frame_slot){Py_NewRef(f->obj), f->off, frame};
    nfused++;
    return frame;
}

/* The stack of s, root first, shims left out (or kept as None), handed to
 * finish(frames, partial, depth) for its root. New reference. */
static PyObject *call_resolve(PyObject *resolve_frame, PyObject *finish, const ts_staging *st, const ts_ssample *s,
                              PyObject *partial, int shims) {
    PyObject *t = PyTuple_New((Py_ssize_t)s->nframes);
    if (!t) return NULL;
    Py_ssize_t k = 0;
    for (uint32_t i = s->nframes; i-- > 0;) {
        PyObject *owned, *frame = frame_of(&st->frames[s->first + i], resolve_frame, &owned);
        if (!frame) {
            Py_DECREF(t);
            return NULL;
        }
        if (frame != Py_None || shims) PyTuple_SET_ITEM(t, k++, Py_NewRef(frame));
        Py_XDECREF(owned);
    }
    if (k < (Py_ssize_t)s->nframes) { /* shims were left out */
        PyObject *exact = PyTuple_GetSlice(t, 0, k);
        Py_DECREF(t);
        if (!exact) return NULL;
        t = exact;
    }
    PyObject *value = PyObject_CallFunction(finish, "OOI", t, partial, (unsigned int)s->depth);
    Py_DECREF(t);
    return value;
}

static void release_pins(ts_staging *st, ts_ssample *s) {
    for (uint32_t i = 0; i < s->nframes; i++) Py_CLEAR(st->frames[s->first + i].obj);
}

PyObject *ts_stackcache_get(ts_staging *st, ts_ssample *s, PyObject *partial, PyObject *resolve_frame, PyObject *finish,
                            int shims) {
    for (uint32_t i = 0; i < s->nframes; i++) {
        if (st->frames[s->first + i].kind & TS_KIND_RESOLVED) { /* a fresh identity tuple: never seen again */
            uncached++;
            PyObject *value = call_resolve(resolve_frame, finish, st, s, partial, shims);
            if (value) release_pins(st, s);
            return value;
        }
    }
    uint64_t h = key_hash(st, s, shims);
    entry *e;
    probe(h, st, s, shims, &e);
    if (e) {
        hits++;
        release_pins(st, s); /* the cache pins the same code objects: none of them can die here */
        return Py_NewRef(e->value);
    }
    misses++;
    PyObject *value = call_resolve(resolve_frame, finish, st, s, partial, shims);
    if (!value) return NULL;
    if (nentries >= MAX_STACKS || nframes_used + s->nframes > MAX_FRAMES) ts_stackcache_clear();
    if (reserve(s->nframes) < 0) { /* out of memory: this stack goes uncached */
        release_pins(st, s);
        return value;
    }
    size_t *where = probe(h, st, s, shims, &e); /* resolve() or the clear may have moved things */
    if (e) {
        release_pins(st, s);
        return value;
    }
    slots[(uintptr_t)where - 1] = (uint32_t)(nentries + 1);
    entry *n = &entries[nentries++];
    n->hash = h;
    n->first = nframes_used;
    n->nframes = s->nframes;
    n->depth = s->depth;
    n->partial = s->partial;
    n->shims = (uint8_t)shims;
    n->value = Py_NewRef(value);
    for (uint32_t i = 0; i < s->nframes; i++) { /* the staged pins become the cache's */
        ts_sframe *f = &st->frames[s->first + i];
        frames[nframes_used++] = (key_frame){f->obj, f->off};
        f->obj = NULL;
    }
    return value;
}

void ts_stackcache_clear(void) {
    clear_frames();
    /* Empty the cache before letting go: a decref can free a code object,
     * whose destroy hook must find a consistent (empty) cache. */
    entry *old_entries = entries;
    key_frame *old_frames = frames;
    size_t n = nentries, nf = nframes_used;
    entries = NULL;
    frames = NULL;
    nentries = cap_entries = nframes_used = cap_frames = 0;
    if (slots) memset(slots, 0, nslots * sizeof *slots);
    for (size_t i = 0; i < n; i++) Py_DECREF(old_entries[i].value);
    for (size_t i = 0; i < nf; i++) Py_DECREF(old_frames[i].code);
    free(old_entries);
    free(old_frames);
}

PyObject *ts_stackcache_counts(void) {
    return Py_BuildValue("(nnKKK)", (Py_ssize_t)nentries, (Py_ssize_t)nfused, (unsigned long long)hits,
                         (unsigned long long)misses, (unsigned long long)uncached);
}
