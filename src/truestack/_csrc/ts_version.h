/* Everything that differs between CPython versions, in one place.
 *
 * The walker (walker.c) reads interpreter structures only through the
 * offsets in ts_layout, filled once by ts_layout_init() (layout.c) from the
 * compiled headers — or, on 3.13+, from _PyRuntime.debug_offsets where that
 * table covers the field. Adding a version means touching this header and
 * layout.c, not the walker.
 */
#ifndef TS_VERSION_H
#define TS_VERSION_H

#include "ts_common.h"

typedef enum {
    TS_CHAIN_FRAMEOBJ, /* 3.10: tstate->frame, PyFrameObject.f_back */
    TS_CHAIN_CFRAME,   /* 3.11, 3.12: tstate->cframe->current_frame, _PyInterpreterFrame.previous */
    TS_CHAIN_DIRECT    /* 3.13: tstate->current_frame */
} ts_chain_kind;

typedef struct {
    ts_chain_kind chain;
    /* thread state */
    long ts_top;                 /* frame (3.10), cframe (3.11/12), current_frame (3.13) */
    long cf_current;             /* _PyCFrame.current_frame; -1 when no cframe */
    long cf_previous;            /* _PyCFrame.previous */
    long ts_root_cframe;         /* PyThreadState.root_cframe (3.11/12): the cframe no eval loop owns; else -1 */
    long ts_native_tid;          /* -1 on 3.10 */
    long ts_interp;              /* PyThreadState.interp */
    const void *main_interp;     /* the only interpreter whose threads are walked */
    long ts_chunk, ts_stack_top; /* datastack_chunk / datastack_top; -1 on 3.10 */
    long chunk_previous, chunk_size, chunk_data;
    /* frames */
    long fr_previous, fr_code, fr_instr, fr_owner; /* fr_owner -1 on 3.10 */
    int instr_is_index;                            /* 3.10: f_lasti is an int instruction index */
    long fr_min_size;                              /* bytes a frame occupies at least */
    long fr_is_entry;     /* 3.11: _PyInterpreterFrame.is_entry (bool), the first frame of a C eval call; else -1 */
    long gen_iframe;      /* offsetof(PyGenObject, gi_iframe); -1 on 3.10 */
    long gen_frame_state; /* offsetof(PyGenObject, gi_frame_state) (int8_t); -1 on 3.10 */
    int gen_executing;    /* FRAME_EXECUTING: the only state a generator frame on a chain can be in */
    long frobj_data;      /* offsetof(PyFrameObject, _f_frame_data); -1 on 3.10 */
    /* 3.10: offsetof(PyFrameObject, f_gen), the coroutine a frame runs; -1 elsewhere */
    long fr_gen;
    /* finding the frame that resumes a generator whose `previous` is not
     * linked yet (3.12 only; -1 elsewhere): walker.c, resumer() */
    long code_framesize;              /* offsetof(PyCodeObject, co_framesize): a frame's datastack words */
    long ts_exc_info, ts_exc_state;   /* PyThreadState.exc_info, .exc_state */
    long gen_exc_state, exc_previous; /* PyGenObject.gi_exc_state, _PyErr_StackItem.previous_item */
    /* code objects */
    long code_adaptive;                                        /* offsetof co_code_adaptive; -1 on 3.10 */
    long code_firsttraceable;                                  /* offsetof _co_firsttraceable; -1 on 3.10 */
    int owner_thread, owner_gen, owner_frameobj, owner_cstack; /* -1 if absent */
    /* type objects the plausibility checks compare against */
    const void *code_type, *frame_type, *gen_type, *coro_type, *asyncgen_type;
    const char *source; /* "compiled headers" or "_Py_DebugOffsets" */
    int debug_offset_mismatches;
} ts_layout;

extern ts_layout ts_L;

/* Fills ts_L; returns 0 or -1 with a Python exception set. GIL held. */
int ts_layout_init(void);

/* Thread-specific-storage key holding each thread's own PyThreadState
 * (PyGILState_GetThisThreadState), valid even while the thread has no GIL. */
int ts_tstate_key_init(void);
extern unsigned int ts_tstate_key;

/* The runtime's lock over every interpreter's thread list (CPython's
 * HEAD_LOCK). The main GIL does not guard the main interpreter's list: since
 * 3.12 a thread holding a sub-interpreter's own GIL links and frees
 * main-interpreter thread states (cross-interpreter calls), and on every
 * version PyGILState_Ensure links one before it takes the GIL. Hold it only
 * to copy fields out of the list: no Python API, no other lock inside. */
void ts_thread_list_lock(void);
void ts_thread_list_unlock(void);

#endif
