"""gpumemtrace installed with pip: the native command and its files live in this package's _native/ folder.

_native/ is the CMake install tree (bin/gpumemtrace, lib/gpumemtrace/libgpumemtrace.so, lib/gpumemtrace/sim/,
lib/gpumemtrace/python/ with the in-process package), so the command finds its preload library, the simulated
runtime and the in-process Python package relative to itself exactly as in a `cmake --install` prefix.
The `gpumemtrace` console script and `python -m gpumemtrace` run that command (launcher.py); the pytest plugin
(pytest_plugin.py) profiles a test session with it.
"""
import os

__all__ = ["native_command", "native_dir"]


def native_dir():
    """The install tree inside the package (empty when the package was not installed from a wheel)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def native_command():
    """The gpumemtrace executable: the package's own, else GMT_CLI (a CMake build tree's, for the tests)."""
    configured = os.environ.get("GMT_CLI")
    if configured:
        return configured
    return os.path.join(native_dir(), "bin", "gpumemtrace")
