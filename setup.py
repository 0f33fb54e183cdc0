"""Builds the four optional C extensions.

- `truestack._native`: the sampler (signal handler, walker, ring, timers).
- `truestack._oracle`: the validation oracle that checks the sampler's walker
  (`truestack validate`); it borrows the walker from `_native` at import.
- `truestack._remote`: `truestack dump`'s reader of another process: the
  sampler's walker compiled again against process_vm_readv loads.
- `truestack._debughook`: the debugger's breakpoint fast path (a PEP 523
  frame-evaluation hook on 3.10/3.11, the LINE callback on 3.12+, breakpoint
  conditions and counts in C).

All are optional on purpose: if they cannot be compiled (no compiler, no
internal headers), the package still installs and truestack falls back to the
pure-Python safepoint engine, saying so in every profile (and the debugger to
its Python breakpoint path, saying so when a breakpoint is set).

`TRUESTACK_TEST_BUILD=1` (the test matrix sets it) compiles the test hooks
(walker fault injection) into the oracle and turns every warning into an
error; a user's build has neither. `TRUESTACK_SANITIZE=1` (scripts/sanitizer-check
sets it) compiles and links both with AddressSanitizer and UBSan; such a build
only loads with the ASan runtime preloaded (LD_PRELOAD).
"""
import os
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CSRC = "src/truestack/_csrc"
NATIVE_SOURCES = ["module.c", "sampler.c", "timers.c", "control.c", "walker.c", "layout.c", "ring.c", "staging.c",
                  "safeload.c", "unwind.c", "cfi.c", "cfi_rows.c", "drain.c", "stackcache.c", "wordcache.c",
                  "process_watch.c", "stream_write.c", "main_call.c"]
# --native unwinds C stacks with libunwind (libunwind-dev / libunwind-devel). Without it the
# extension still builds; `--native` then says what to install.
LIBUNWIND_PROBE = "#define UNW_LOCAL_ONLY\n#include <libunwind.h>\nint main(void) { unw_context_t c; unw_cursor_t u;\n" \
    "  unw_getcontext(&c); return unw_init_local2(&u, &c, UNW_INIT_SIGNAL_FRAME) < 0; }\n"
ORACLE_SOURCES = ["validate_module.c", "validate_events.c", "validate_shadow.c", "validate_sync.c",
                  "validate_async.c", "validate_walk.c", "validate_classify.c", "validate_fault.c"]
DEBUGHOOK_SOURCES = ["debughook.c", "debughook_records.c", "debughook_decide.c"]
# `truestack dump`: the sampler's walker.c and layout.c compiled a second time, against
# process_vm_readv loads (TS_REMOTE_LOADS) instead of the signal handler's guarded ones.
REMOTE_SOURCES = ["remote.c", "walker.c", "layout.c"]


class OptionalBuildExt(build_ext):
    def finalize_options(self) -> None:
        super().finalize_options()
        # Test and user builds compile with different macros: never reuse one's objects for the other.
        # The .so left in build/lib by the other mode looks up to date, so always compile.
        mode = "test" if os.environ.get("TRUESTACK_TEST_BUILD") == "1" else "release"
        if sanitize():
            mode += "-sanitize"
        self.build_temp = f"{self.build_temp}-{mode}"
        self.force = True

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # any build failure means "fallback"
            if os.environ.get("TRUESTACK_REQUIRE_NATIVE"):
                raise
            self._warn(exc)

    def build_extension(self, ext: Extension) -> None:
        if ext.name == "truestack._native" and self._have_libunwind():
            ext.define_macros.append(("TS_HAVE_LIBUNWIND", "1"))
            ext.libraries.append("unwind")
        elif ext.name == "truestack._native":
            msg = "libunwind not found (install libunwind-dev or libunwind-devel): --native will be unavailable"
            if os.environ.get("TRUESTACK_REQUIRE_NATIVE"):
                raise RuntimeError(msg)
            sys.stderr.write(f"WARNING: {msg}\n")
        try:
            super().build_extension(ext)
        except Exception as exc:
            if os.environ.get("TRUESTACK_REQUIRE_NATIVE"):
                raise
            self._warn(exc)

    def _have_libunwind(self) -> bool:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "probe.c")
            with open(src, "w") as f:
                f.write(LIBUNWIND_PROBE)
            try:
                objs = self.compiler.compile([src], output_dir=tmp)
                self.compiler.link_executable(objs, "probe", output_dir=tmp, libraries=["unwind"])
            except Exception:
                return False
        return True

    @staticmethod
    def _warn(exc: Exception) -> None:
        sys.stderr.write(
            f"WARNING: truestack native extension not built ({exc}); "
            "the pure-Python safepoint engine will be used.\n"
        )


SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=undefined",
                  "-g", "-O1"]


def sanitize() -> bool:
    return os.environ.get("TRUESTACK_SANITIZE") == "1"


def extension(name: str, sources: list[str], macros: list[tuple[str, str]] | None = None) -> Extension:
    include_dir = sysconfig.get_paths()["include"]
    test_build = os.environ.get("TRUESTACK_TEST_BUILD") == "1"
    flags = ["-O2", "-std=gnu11", "-fno-strict-aliasing", "-fvisibility=hidden", "-Wall"]
    if test_build:
        flags += ["-Wextra", "-Werror"]
    if sanitize():
        flags += SANITIZE_FLAGS  # the later -O1 overrides -O2
    return Extension(
        name,
        sources=[f"{CSRC}/{s}" for s in sources],
        include_dirs=[include_dir, os.path.join(include_dir, "internal"), CSRC],
        define_macros=[("Py_BUILD_CORE_MODULE", "1")] + ([("TS_TEST_HOOKS", "1")] if test_build else []) + (macros or []),
        extra_compile_args=flags,
        extra_link_args=["-fsanitize=address,undefined"] if sanitize() else [],
        libraries=["rt"],
    )


def agent() -> Extension:
    """The library `attach` loads into a running process: never sanitized (the target is not), no
    internal headers (it runs in any CPython 3.10-3.13)."""
    flags = ["-O2", "-std=gnu11", "-fvisibility=hidden", "-Wall"]
    if os.environ.get("TRUESTACK_TEST_BUILD") == "1":
        flags += ["-Wextra", "-Werror"]
    return Extension("truestack._attach_agent", sources=[f"{CSRC}/attach_agent.c"], extra_compile_args=flags,
                     libraries=["pthread"])


setup(
    ext_modules=[agent(), extension("truestack._native", NATIVE_SOURCES), extension("truestack._oracle", ORACLE_SOURCES),
                 extension("truestack._debughook", DEBUGHOOK_SOURCES),
                 extension("truestack._remote", REMOTE_SOURCES, [("TS_REMOTE_LOADS", "1")])],
    cmdclass={"build_ext": OptionalBuildExt},
)
