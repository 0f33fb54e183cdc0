/* Comparing a walked stack with the expected one. Everything here runs
 * inside the validation signal handler too: integer work on preallocated
 * arrays only. */
#include "validate_state.h"

const char *const ts_v_kind_names[TS_V_NKINDS] = {
    "ok", "boundary", "missing", "extra", "reordered", "wrong_code", "wrong_line", "partial",
};
const char *const ts_v_layer_names[TS_V_NLAYERS] = {"sync", "async", "shadow"};

_Atomic uint64_t ts_v_faults_applied;

/* Stacks are root-first arrays that may hold only their leaf-most part:
 * a covers true positions [ta - na, ta), b covers [tb - nb, tb). Compares
 * the positions both cover below `upto`. */
TS_SIGNAL_SAFE static int overlap_equal(void *const *a, int na, int ta, void *const *b, int nb, int tb, int upto) {
    int a0 = ta - na, b0 = tb - nb;
    int lo = a0 > b0 ? a0 : b0;
    if (upto > ta) upto = ta;
    if (upto > tb) upto = tb;
    if (lo > upto) return 0;
    for (int p = lo; p < upto; p++)
        if (a[p - a0] != b[p - b0]) return 0;
    return 1;
}

/* Is `small` a subsequence of `big` (order kept, gaps allowed)? */
TS_SIGNAL_SAFE static int is_subsequence(void *const *small, int ns, void *const *big, int nb) {
    int j = 0;
    for (int i = 0; i < nb && j < ns; i++)
        if (big[i] == small[j]) j++;
    return j == ns;
}

/* Same multiset of pointers? Exact for short stacks; for long ones a
 * sum/xor/square fingerprint (no allocation allowed here). */
TS_SIGNAL_SAFE static int same_multiset(void *const *a, void *const *b, int n) {
    if (n <= 64) {
        uint64_t used = 0;
        for (int i = 0; i < n; i++) {
            int found = 0;
            for (int j = 0; j < n; j++) {
                if (!(used >> j & 1) && b[j] == a[i]) {
                    used |= (uint64_t)1 << j;
                    found = 1;
                    break;
                }
            }
            if (!found) return 0;
        }
        return 1;
    }
    uint64_t sa = 0, sb = 0, xa = 0, xb = 0, qa = 0, qb = 0;
    for (int i = 0; i < n; i++) {
        uint64_t u = (uint64_t)(uintptr_t)a[i], v = (uint64_t)(uintptr_t)b[i];
        sa += u, sb += v, xa ^= u, xb ^= v, qa += u * u, qb += v * v;
    }
    return sa == sb && xa == xb && qa == qb;
}

TS_SIGNAL_SAFE int ts_v_classify(void *const *w, int nw, int tdw, void *const *s, int ns, int tds, int allow_boundary) {
    if (tdw == tds && overlap_equal(w, nw, tdw, s, ns, tds, tdw)) return TS_V_OK;
    /* One side has one more leaf frame and everything below it agrees:
     * the event for that frame had not run yet (entry) or already had (exit). */
    if (allow_boundary) {
        if (tdw == tds + 1 && overlap_equal(w, nw, tdw, s, ns, tds, tds)) return TS_V_BOUNDARY;
        if (tds == tdw + 1 && overlap_equal(w, nw, tdw, s, ns, tds, tdw)) return TS_V_BOUNDARY;
    }
    if (tdw < tds && is_subsequence(w, nw, s, ns)) return TS_V_MISSING;
    if (tdw > tds && is_subsequence(s, ns, w, nw)) return TS_V_EXTRA;
    if (tdw == tds && nw == ns && same_multiset(w, s, nw)) return TS_V_REORDERED;
    return TS_V_WRONG_CODE;
}
