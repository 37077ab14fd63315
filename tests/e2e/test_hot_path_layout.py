"""The preloaded library's hot path stays compact (recorder/cache_hints.h: GMT_HOT and GMT_COLD).

A recorded event runs right after a driver call that has pushed our code out of the core's nearest caches, so
the functions every event runs are placed together in .text.hot. On the H200 this took the hooks' async pairs
from 1.243x to 1.215x of raw and 1.261x to 1.228x in two runs (docs/benchmarks.md). Nothing else shows such a
regression in CI: this test reads the built library's symbol table and fails when a function of the path leaves
the run, when the run grows past what its functions need, or when a rare branch moves back into record().
Release-type builds only: sanitizer instrumentation changes every function's size and placement.
"""
import os
import re
import subprocess
import unittest

BUILD = os.environ.get("GMT_BUILD_DIR", "build")
LIBRARY = os.path.join(BUILD, "lib", "gpumemtrace", "libgpumemtrace.so")

# Demangled names (prefix match on the part before the parameter list) that every recorded event of some backend
# runs: the hooks of the allocation calls, the recorder's record() with its stack walk and clock, CUPTI's callback.
HOT = [
    "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync",
    "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemFreeAsync",
    "gmt::recorder::record", "gmt::recorder::capture_stack", "gmt::unwind::fast_backtrace",
    "gmt::recorder::cached_stack_id", "gmt::recorder::event_time_ns", "gmt::recorder::record_driver_alloc",
    "gmt::recorder::record_driver_free", "gmt::recorder::records_through",
    "gmt::cupti::on_callback",
]
# Accessors every event asks, inline since 2026-12-07 (as calls they cost 54 of 381 instructions an event,
# callgrind): the event's own functions must not call them.
INLINE = [
    "gmt::recorder::settings", "gmt::recorder::active_backend", "gmt::recorder::driver_level_backend",
    "gmt::recorder::current_thread_id", "gmt::interpose::ensure_backend_started", "gmt::interpose::driver_real",
    "gmt::interpose::real_function",
]
# The rare branches of record(), GMT_COLD: functions of their own, outside the hot run.
COLD = [
    "gmt::recorder::(anonymous namespace)::register_this_thread",
    "gmt::recorder::(anonymous namespace)::hand_over_full_chunk",
    "gmt::recorder::(anonymous namespace)::intern_new_stack",
    "gmt::recorder::(anonymous namespace)::claim_device_description",
]
# The run held ~20 KiB at b3bcb7f, against ~120 KiB of text that the same functions spanned before.
MAX_HOT_SPAN = 48 * 1024
# record() without its rare branches: 530 bytes at b3bcb7f, 3076 with them inlined.
MAX_RECORD_SIZE = 1024


def sanitizer_build():
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            return "-fsanitize=" in f.read()
    except OSError:
        return False


def function_symbols():
    """{demangled name without parameters: [(address, size)]} of the library's functions."""
    out = subprocess.run(["nm", "-C", "-S", "--defined-only", LIBRARY], capture_output=True, text=True,
                         check=True).stdout
    symbols = {}
    line_format = re.compile(r"^([0-9a-f]+) ([0-9a-f]+) [tTW] (.+)$")
    for line in out.splitlines():
        m = line_format.match(line)
        if not m or "[clone" in m.group(3):  # .cold parts are meant to be elsewhere
            continue
        name = m.group(3)
        if name.startswith("gmt_driver_wrapper_"):  # the hidden aliases: the same addresses
            continue
        anonymous = "(anonymous namespace)"
        base = name.replace(anonymous, "@").split("(")[0].replace("@", anonymous)  # the name, less its parameters
        symbols.setdefault(base, []).append((int(m.group(1), 16), int(m.group(2), 16)))
    return symbols


@unittest.skipIf(sanitizer_build(), "a sanitizer build: placement is a property of the release build")
class HotPathLayoutTest(unittest.TestCase):
    def setUp(self):
        self.symbols = function_symbols()

    def hot_run(self):
        ranges = []
        for name in HOT:
            self.assertTrue(name in self.symbols, f"{name} is not a function of {LIBRARY}")
            ranges.extend(self.symbols[name])
        start = min(address for address, _ in ranges)
        end = max(address + size for address, size in ranges)
        return start, end

    def test_the_event_path_is_one_compact_run(self):
        start, end = self.hot_run()
        self.assertLessEqual(end - start, MAX_HOT_SPAN,
                             f"the hot path spans {end - start} bytes ({start:#x}-{end:#x}): a function of it "
                             "lost GMT_HOT, or a large one joined it")

    def test_the_rare_branches_are_outside_the_run(self):
        start, end = self.hot_run()
        for name in COLD:
            self.assertTrue(name in self.symbols, f"{name} is no function of its own: inlined into record() again?")
            for address, size in self.symbols[name]:
                self.assertFalse(start <= address < end, f"{name} at {address:#x} lies in the hot run")

    def test_the_event_path_calls_no_accessor(self):
        # A copy may still be emitted for a cold caller; the event's own functions must not call it.
        for name in ["gmt::recorder::record", "cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync",
                     "cuMemAlloc_v2", "cuMemFree_v2", "cuMemAllocAsync", "cuMemFreeAsync"]:
            for address, size in self.symbols[name]:
                listing = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", f"--start-address={address}",
                                          f"--stop-address={address + size}", LIBRARY],
                                         capture_output=True, text=True, check=True).stdout
                calls = [line for line in listing.splitlines() if "\tcall" in line]
                self.assertTrue(calls or size < 64, f"no calls found in {name}: is the listing read right?")
                for accessor in INLINE:
                    called = [line for line in calls if f"<{accessor}(" in line]
                    self.assertEqual(called, [], f"{name} calls {accessor}, which every event runs")

    def test_record_keeps_only_its_common_path(self):
        sizes = [size for _, size in self.symbols["gmt::recorder::record"]]
        self.assertEqual(len(sizes), 1)
        self.assertLessEqual(sizes[0], MAX_RECORD_SIZE, f"record() is {sizes[0]} bytes")


if __name__ == "__main__":
    unittest.main()
