"""Builds the optional native sampler extension.

The extension is optional on purpose: if it cannot be compiled (no compiler,
no internal headers), the package still installs and truestack falls back to
the pure-Python safepoint engine, saying so in every profile.
"""
import glob
import os
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any build failure means "fallback"
            self._warn(exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            if os.environ.get("TRUESTACK_REQUIRE_NATIVE"):
                raise
            self._warn(exc)

    @staticmethod
    def _warn(exc: Exception) -> None:
        sys.stderr.write(
            f"WARNING: truestack native extension not built ({exc}); "
            "the pure-Python safepoint engine will be used.\n"
        )


include_dir = sysconfig.get_paths()["include"]
native = Extension(
    "truestack._native",
    sources=sorted(glob.glob("src/truestack/_csrc/*.c")),
    include_dirs=[include_dir, os.path.join(include_dir, "internal"), "src/truestack/_csrc"],
    define_macros=[("Py_BUILD_CORE_MODULE", "1")],
    extra_compile_args=["-O2", "-std=gnu11", "-fno-strict-aliasing", "-Wall", "-Wno-unused-function"],
    libraries=["rt"],
)

setup(ext_modules=[native] if native.sources else [], cmdclass={"build_ext": OptionalBuildExt})
