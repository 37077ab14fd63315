"""CuPy's memory pool: arrays are allocated and freed, the pool keeps the freed memory for reuse. At exit the pool
still holds it: `gpumemtrace report` names the CuPy pool and explains the held memory as its cache, not a leak."""
import time

import cupy

arrays = [cupy.ones((i + 1) * (1 << 18), dtype=cupy.float32) for i in range(16)]
del arrays[::2]
time.sleep(0.3)  # periodic samples of the pool
pool = cupy.get_default_memory_pool()
print(f"cupy: used={pool.used_bytes()} total={pool.total_bytes()}", flush=True)
