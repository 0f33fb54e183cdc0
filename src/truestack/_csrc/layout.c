/* Per-version layout (see ts_version.h). Runs with the GIL at import. */
#include "Python.h"
#include "frameobject.h"
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_frame.h"
#endif
#include "internal/pycore_runtime.h"
#if PY_VERSION_HEX >= 0x030C0000
#include "internal/pycore_pystate.h"
#endif
#if PY_VERSION_HEX >= 0x030D0000
#include "internal/pycore_genobject.h"
#endif
#include "ts_version.h"

ts_layout ts_L;
unsigned int ts_tstate_key;

int ts_tstate_key_init(void) {
#if PY_VERSION_HEX >= 0x030C0000
    Py_tss_t *k = &_PyRuntime.autoTSSkey;
#else
    Py_tss_t *k = &_PyRuntime.gilstate.autoTSSkey;
#endif
    if (!k->_is_initialized) {
        PyErr_SetString(PyExc_RuntimeError, "interpreter thread-state key not initialised");
        return -1;
    }
    ts_tstate_key = (unsigned int)k->_key;
    /* Sanity: the key must map this thread to its own thread state. */
    if (pthread_getspecific((pthread_key_t)ts_tstate_key) != (void *)PyThreadState_Get()) {
        PyErr_SetString(PyExc_RuntimeError, "thread-state key does not match the current thread state");
        return -1;
    }
    return 0;
}

void ts_thread_list_lock(void) {
#if PY_VERSION_HEX >= 0x030D0000
    /* Taken as CPython takes it (HEAD_LOCK: _Py_LOCK_DONT_DETACH), keeping the
     * GIL while waiting: no holder of this lock waits for a GIL. The public
     * PyMutex_Lock lets go of the GIL while it waits, and may be handed the lock
     * before it has the GIL back: a thread holding the GIL and waiting for the
     * list (starting a thread does) then waits on us forever, and we on it (the
     * 10 kHz stress test on 3.13 hung so, one run in three). The call CPython
     * uses is not exported: try to take it, let other threads run, try again. */
    PyMutex *m = &_PyRuntime.interpreters.mutex;
    for (unsigned tries = 0;; tries++) {
        uint8_t bits = __atomic_load_n(&m->_bits, __ATOMIC_RELAXED);
        if (!(bits & _Py_LOCKED) && __atomic_compare_exchange_n(&m->_bits, &bits, (uint8_t)(bits | _Py_LOCKED), 0,
                                                                __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        if (tries < 100) {
            sched_yield();
        } else {
            struct timespec pause = {0, 20000};
            nanosleep(&pause, NULL);
        }
    }
#else
    PyThread_acquire_lock(_PyRuntime.interpreters.mutex, WAIT_LOCK);
#endif
}

void ts_thread_list_unlock(void) {
#if PY_VERSION_HEX >= 0x030D0000
    PyMutex_Unlock(&_PyRuntime.interpreters.mutex);
#else
    PyThread_release_lock(_PyRuntime.interpreters.mutex);
#endif
}

int ts_layout_init(void) {
    ts_layout *L = &ts_L;
    memset(L, 0xff, sizeof *L); /* every offset -1 = absent unless set below */
    L->code_type = &PyCode_Type;
    L->frame_type = &PyFrame_Type;
    L->gen_type = &PyGen_Type;
    L->coro_type = &PyCoro_Type;
    L->asyncgen_type = &PyAsyncGen_Type;
    L->source = "compiled headers";
    L->debug_offset_mismatches = 0;
    L->instr_is_index = 0;
    L->ts_root_cframe = -1;
    L->ts_interp = offsetof(PyThreadState, interp);
    L->main_interp = PyInterpreterState_Main();
#if PY_VERSION_HEX < 0x030B0000
    L->chain = TS_CHAIN_FRAMEOBJ;
    L->ts_top = offsetof(PyThreadState, frame);
    L->fr_previous = offsetof(PyFrameObject, f_back);
    L->fr_code = offsetof(PyFrameObject, f_code);
    L->fr_instr = offsetof(PyFrameObject, f_lasti);
    L->instr_is_index = 1;
    L->fr_gen = offsetof(PyFrameObject, f_gen);
    L->fr_min_size = sizeof(PyFrameObject);
#else
    L->ts_native_tid = offsetof(PyThreadState, native_thread_id);
    L->ts_chunk = offsetof(PyThreadState, datastack_chunk);
    L->ts_stack_top = offsetof(PyThreadState, datastack_top);
    L->chunk_previous = offsetof(_PyStackChunk, previous);
    L->chunk_size = offsetof(_PyStackChunk, size);
    L->chunk_data = offsetof(_PyStackChunk, data);
    L->fr_previous = offsetof(_PyInterpreterFrame, previous);
    L->fr_owner = offsetof(_PyInterpreterFrame, owner);
    L->fr_min_size = offsetof(_PyInterpreterFrame, localsplus);
#if PY_VERSION_HEX < 0x030C0000
    L->fr_is_entry = offsetof(_PyInterpreterFrame, is_entry);
#else
    L->fr_is_entry = -1; /* 3.12+ mark a C eval call by its FRAME_OWNED_BY_CSTACK entry frame */
#endif
    L->gen_iframe = offsetof(PyGenObject, gi_iframe);
    L->gen_frame_state = offsetof(PyGenObject, gi_frame_state);
    L->gen_executing = FRAME_EXECUTING;
    L->frobj_data = offsetof(PyFrameObject, _f_frame_data);
    L->code_adaptive = offsetof(PyCodeObject, co_code_adaptive);
    L->code_firsttraceable = offsetof(PyCodeObject, _co_firsttraceable);
    L->owner_thread = FRAME_OWNED_BY_THREAD;
    L->owner_gen = FRAME_OWNED_BY_GENERATOR;
    L->owner_frameobj = FRAME_OWNED_BY_FRAME_OBJECT;
#if PY_VERSION_HEX >= 0x030C0000
    L->owner_cstack = FRAME_OWNED_BY_CSTACK;
#else
    L->owner_cstack = -1;
#endif
#if PY_VERSION_HEX < 0x030D0000
    L->chain = TS_CHAIN_CFRAME;
    L->ts_top = offsetof(PyThreadState, cframe);
    L->cf_current = offsetof(_PyCFrame, current_frame);
    L->cf_previous = offsetof(_PyCFrame, previous);
    L->ts_root_cframe = offsetof(PyThreadState, root_cframe);
    L->fr_code = offsetof(_PyInterpreterFrame, f_code);
    L->fr_instr = offsetof(_PyInterpreterFrame, prev_instr);
#if PY_VERSION_HEX >= 0x030C0000 /* resumer() in walker.c */
    L->code_framesize = offsetof(PyCodeObject, co_framesize);
    L->ts_exc_info = offsetof(PyThreadState, exc_info);
    L->ts_exc_state = offsetof(PyThreadState, exc_state);
    L->gen_exc_state = offsetof(PyGenObject, gi_exc_state);
    L->exc_previous = offsetof(_PyErr_StackItem, previous_item);
#endif
#else
    L->chain = TS_CHAIN_DIRECT;
    L->ts_top = offsetof(PyThreadState, current_frame);
    L->fr_code = offsetof(_PyInterpreterFrame, f_executable);
    L->fr_instr = offsetof(_PyInterpreterFrame, instr_ptr);
    {
        /* 3.13+: the runtime publishes its own layout for out-of-process
         * tools; prefer it for the fields it covers. */
        const _Py_DebugOffsets *d = &_PyRuntime.debug_offsets;
        if (memcmp(d->cookie, "xdebugpy", 8) == 0) {
            long v[][2] = {
                {(long)d->thread_state.current_frame, L->ts_top},
                {(long)d->thread_state.native_thread_id, L->ts_native_tid},
                {(long)d->thread_state.datastack_chunk, L->ts_chunk},
                {(long)d->interpreter_frame.previous, L->fr_previous},
                {(long)d->interpreter_frame.executable, L->fr_code},
                {(long)d->interpreter_frame.instr_ptr, L->fr_instr},
                {(long)d->interpreter_frame.owner, L->fr_owner},
                {(long)d->code_object.co_code_adaptive, L->code_adaptive},
            };
            for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
                if (v[i][0] != v[i][1]) L->debug_offset_mismatches++;
            L->ts_top = v[0][0];
            L->ts_native_tid = v[1][0];
            L->ts_chunk = v[2][0];
            L->fr_previous = v[3][0];
            L->fr_code = v[4][0];
            L->fr_instr = v[5][0];
            L->fr_owner = v[6][0];
            L->code_adaptive = v[7][0];
            L->source = "_Py_DebugOffsets";
        }
    }
#endif
#endif
    return 0;
}
