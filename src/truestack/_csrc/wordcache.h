/* --native: each drained sample's word arrays (the C return addresses, the
 * eval-call segments) as a tuple of ints shared by every sample with the
 * same words.
 *
 * A hot loop repeats its chains of return addresses sample after sample;
 * building a fresh tuple of 20-100 ints for each, then slicing and hashing
 * it in Python to find its symbolized frames, was a large part of what
 * --native added to the collector per sample. With one tuple per distinct
 * array, the collector finds a chain's frames by the tuple's identity. The
 * cache holds its tuples, so an identity cannot be reused while it is cached.
 * GIL-side only: nothing here is reachable from the signal handler.
 */
#ifndef TS_WORDCACHE_H
#define TS_WORDCACHE_H
#include "Python.h"
#include "ts_common.h"
#include <stddef.h>
#include <stdint.h>

TS_HIDDEN_BEGIN
/* The tuple of the n words at w (as Python ints): the cached one when these
 * words were seen before. New reference, or NULL with an exception set. */
PyObject *ts_wordcache_tuple(const uint64_t *w, size_t n);
/* Lets go of every cached tuple. */
void ts_wordcache_clear(void);
TS_HIDDEN_END
#endif
