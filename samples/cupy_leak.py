"""CuPy arrays kept by a loop (issue 34, point 4): each step makes a scratch array it drops (its chunk stays cached in
CuPy's pool) and keeps another; the report must name the kept arrays at their line, with the pool's chunks cached at
exit, not leaked. Then the cost of one empty+del, timed (prints ns_per_array)."""
import time

import cupy

STEPS = 16
KEPT = 2 << 20
kept = []
for step in range(STEPS):
    scratch = cupy.empty(1 << 20, dtype=cupy.uint8)
    del scratch
    kept.append(cupy.empty(KEPT, dtype=cupy.uint8))  # KEPT-LINE
cupy.cuda.runtime.deviceSynchronize()
rounds = 20000
started = time.perf_counter_ns()
for _ in range(rounds):
    x = cupy.empty(4096, dtype=cupy.uint8)
    del x
elapsed = time.perf_counter_ns() - started
pool = cupy.get_default_memory_pool()
print(f"steps {STEPS}", flush=True)
print(f"kept_bytes {KEPT}", flush=True)
print(f"pool_total {pool.total_bytes()}", flush=True)
print(f"ns_per_array {elapsed / rounds:.1f}", flush=True)
