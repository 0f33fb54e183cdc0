/* What truestack._native lends the validation oracle (truestack._oracle).
 *
 * The oracle checks the walker the sampler uses, so it must call that very
 * walker and share its one SIGSEGV/SIGBUS handler rather than link its own
 * copies (two fault handlers chained to each other would call each other
 * forever on a foreign fault). _native publishes this table as a capsule;
 * the oracle imports it at init. Every function here is TS_SIGNAL_SAFE
 * except safeload_install.
 */
#ifndef TS_CORE_API_H
#define TS_CORE_API_H
#include "walker.h"

#define TS_CORE_API_CAPSULE "truestack._native._core_api"
#define TS_CORE_API_VERSION 2

typedef struct {
    int version;
    void *(*current_tstate)(void);
    void (*walk)(void *tstate, ts_rawframe *out, int max, ts_walk_result *res);
    int (*safeload_install)(void); /* GIL held: (re)install the fault handler on top */
    int (*guarded)(void);          /* is our fault handler the installed one? */
    uint64_t (*load_sized)(uintptr_t addr, int size, int *fault);
    const char *const *partial_names;
} ts_core_api;

#endif
