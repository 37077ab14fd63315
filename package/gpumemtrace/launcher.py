"""The `gpumemtrace` console script and `python -m gpumemtrace`: replace this Python process with the native
command, so that its exit code, signals and terminal are the command's own (`run` passes the app's through)."""
import os
import sys

from . import native_command

EXIT_MISSING_INSTALL = 125  # cli/exit_codes.h: kExitRunFailed, "a missing part of the install"


def main():
    command = native_command()
    if not os.access(command, os.X_OK):
        sys.stderr.write(f"gpumemtrace: the native command is missing at '{command}'; reinstall gpumemtrace "
                         f"(pip install --force-reinstall gpumemtrace)\n")
        sys.exit(EXIT_MISSING_INSTALL)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command, [command, *sys.argv[1:]])
