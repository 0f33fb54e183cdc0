/* The test-only fault that proves the oracle's comparison can fail: every
 * Nth walk is damaged before it is compared. Compiled only into test builds
 * (TS_TEST_HOOKS); runs inside the validation signal handler. */
#include "validate_state.h"

#ifdef TS_TEST_HOOKS
int ts_v_fault_kind = TS_V_FAULT_NONE;
int ts_v_fault_every = 20;
static _Atomic uint64_t fault_walks;

/* Makes every Nth walk report a wrong stack: drop (or swap with its
 * neighbour) a frame that is not the leaf and whose neighbour has other code,
 * so the damage can never pass for a boundary effect or recursion. Returns 1
 * if the stack was damaged. */
TS_SIGNAL_SAFE int ts_v_apply_fault(void **codes, int *offs, int *n, int *true_depth) {
    if (ts_v_fault_kind == TS_V_FAULT_NONE) return 0;
    uint64_t k = atomic_fetch_add_explicit(&fault_walks, 1, memory_order_relaxed);
    if (ts_v_fault_every > 1 && k % (uint64_t)ts_v_fault_every != 0) return 0;
    int m = *n;
    for (int i = m - 2; i >= 0; i--) {
        if (codes[i] == codes[i + 1]) continue;
        if (ts_v_fault_kind == TS_V_FAULT_SWAP) {
            void *c = codes[i];
            int o = offs[i];
            codes[i] = codes[i + 1], offs[i] = offs[i + 1];
            codes[i + 1] = c, offs[i + 1] = o;
        } else {
            for (int j = i; j < m - 1; j++) codes[j] = codes[j + 1], offs[j] = offs[j + 1];
            *n = m - 1;
            *true_depth -= 1;
        }
        atomic_fetch_add_explicit(&ts_v_faults_applied, 1, memory_order_relaxed);
        return 1;
    }
    return 0;
}
#endif
