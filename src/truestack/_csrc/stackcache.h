/* The drain's stack cache: a sampled stack seen before is handed to the
 * collector as the very object its first occurrence was resolved to.
 *
 * A program spends nearly all of its samples in a few thousand distinct
 * stacks; resolving each sample's frames in Python (a dict probe and a
 * tuple per frame) was most of the collector's cost per sample. The cache
 * keys on what the resolution depends on (each frame's code object and
 * byte offset, the partial-walk reason, the true depth) and pins the code
 * objects while they are keys, so an address can never be reused by a new
 * code object behind the cache's back. GIL-side only.
 */
#ifndef TS_STACKCACHE_H
#define TS_STACKCACHE_H
#include "Python.h"
#include "staging.h"
#include "ts_common.h"

TS_HIDDEN_BEGIN
/* The resolved stack of sample s, whose frames are st->frames[s->first ..]
 * (their pins are consumed: the cache keeps them or they are released).
 * On a miss it is finish(frames, partial, depth), frames root first from
 * resolve_frame(code, offset) (made once per code and offset, cached too;
 * None leaves a frame out, or stays in as None with `shims`, which --native
 * needs to place its C frames; `shims` is part of the key) or
 * resolve_frame((qualname, file, firstlineno),
 * line) for a code that died before the drain (a sample holding one is
 * resolved each time, never cached). New reference, or NULL with an
 * exception set. */
PyObject *ts_stackcache_get(ts_staging *st, ts_ssample *s, PyObject *partial, PyObject *resolve_frame, PyObject *finish,
                            int shims);
/* Lets go of every cached stack and pinned code object. */
void ts_stackcache_clear(void);
/* (stacks cached, frames cached, samples answered from the cache, misses,
 * samples never cacheable) */
PyObject *ts_stackcache_counts(void);
TS_HIDDEN_END
#endif
