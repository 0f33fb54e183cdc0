/* The walker under test, called the way the sampler's handler calls it
 * (walker.h), then normalised for comparison: Python frames only,
 * root-first, with the test-only fault applied. */
#include "validate_state.h"

TS_SIGNAL_SAFE int ts_v_walk(ts_vshadow *sh, int *true_depth, int *reason, int *faulted) {
    ts_walk_result res = {0, 0, TS_OK, NULL, 0};
    void *tstate = ts_core->current_tstate();
    *faulted = 0;
    if (tstate && !ts_core->guarded()) { /* never walk without the fault handler */
        *true_depth = 0;
        *reason = TS_UNGUARDED;
        return 0;
    }
    if (!tstate) {
        *true_depth = 0;
        *reason = TS_NO_TSTATE;
        return 0;
    }
    ts_core->walk(tstate, sh->wbuf, TS_V_WALK_CAP, &res);
    int n = res.nframes < TS_V_WALK_CAP ? res.nframes : TS_V_WALK_CAP;
    int skipped = 0, k = 0;
    /* The walker writes leaf first; the comparisons want root first. */
    for (int i = n - 1; i >= 0; i--) {
        uint32_t ok = sh->wbuf[i].off_kind;
        if (TS_UNPACK_KIND(ok) != TS_KIND_PYTHON) {
            skipped++;
            continue;
        }
        sh->wcodes[k] = sh->wbuf[i].code;
        sh->woffs[k] = TS_UNPACK_OFF(ok);
        k++;
    }
    *true_depth = res.depth - skipped;
    *reason = res.partial;
#ifdef TS_TEST_HOOKS
    *faulted = ts_v_apply_fault(sh->wcodes, sh->woffs, &k, true_depth);
#endif
    return k;
}
