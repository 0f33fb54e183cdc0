/* The one entry point module.c needs from the validation oracle. */
#ifndef TS_VALIDATE_API_H
#define TS_VALIDATE_API_H
#include "Python.h"

/* Adds the validate_* functions to the extension module (call from the
 * module init, after PyModule_Create). Returns 0, or -1 with an exception. */
int ts_validate_add_methods(PyObject *module);
#endif
