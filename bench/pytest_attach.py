"""Why `pytest --gpumemtrace` re-executes pytest under the preload library instead of attaching in-process
(docs/pytest.md, "Why re-execute"): the same 10 cudaMalloc calls, on the simulated runtime, counted in a trace
(a) when libgpumemtrace.so is loaded into the running process with ctypes after start, as an in-process attach
would (it may not load at all: its thread-locals are initial-exec TLS, sized for a library present at start), and (b) when it is preloaded by `gpumemtrace run`. Prints both counts.

usage: python3 bench/pytest_attach.py BUILD_DIR
"""
import ctypes
import json
import os
import subprocess
import sys
import tempfile

CALLS = 10


def allocate():
    # Resolved in the process's global scope, as an extension module's PLT would (a ctypes handle of its own would
    # go to the runtime directly, past any interposer).
    ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
    cudart = ctypes.CDLL(None)
    for _ in range(CALLS):
        pointer = ctypes.c_void_p()
        assert cudart.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(1 << 20)) == 0


def attached(trace):
    """Child: load the library the way an attaching plugin would, then allocate."""
    os.environ["GMT_OUTPUT"] = trace
    os.environ["GMT_BACKEND"] = "runtime"
    os.environ["GMT_SIMULATED"] = "1"
    try:
        ctypes.CDLL(os.environ["GMT_PROBE_LIBRARY"], mode=ctypes.RTLD_GLOBAL)
    except OSError as error:  # e.g. its initial-exec TLS (docs/design.md) does not fit once the process runs
        print(f"attach: the library cannot be loaded into the running process: {error}")
    allocate()


def count(cli, trace):
    if not os.path.exists(trace):
        return 0
    report = subprocess.run([cli, "report", "--format", "json", trace], capture_output=True, text=True)
    return json.loads(report.stdout)["totals"]["allocations"] if report.returncode == 0 else 0


def main():
    if sys.argv[1] == "--attached":
        attached(sys.argv[2])
        return
    if sys.argv[1] == "--preloaded":
        allocate()
        return
    build = os.path.abspath(sys.argv[1])
    cli = os.path.join(build, "bin", "gpumemtrace")
    library = os.path.join(build, "lib", "gpumemtrace", "libgpumemtrace.so")
    sim = os.path.join(build, "lib", "gpumemtrace", "sim")
    with tempfile.TemporaryDirectory() as folder:
        env = dict(os.environ, LD_LIBRARY_PATH=sim, GMT_SIM_QUIET="1", GMT_PROBE_LIBRARY=library)
        trace = os.path.join(folder, "attached.db")
        subprocess.run([sys.executable, __file__, "--attached", trace], env=env, check=True)
        attached_count = count(cli, trace)
        trace = os.path.join(folder, "preloaded.db")
        subprocess.run([cli, "run", "--simulate", "-q", "-o", trace, "--", sys.executable, __file__, "--preloaded"],
                       check=True)
        preloaded_count = count(cli, trace)
    print(f"cudaMalloc calls made: {CALLS} in each process")
    print(f"attached in-process (ctypes after start): {attached_count} recorded")
    print(f"preloaded by gpumemtrace run:             {preloaded_count} recorded")


if __name__ == "__main__":
    main()
