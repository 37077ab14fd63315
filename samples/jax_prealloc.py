"""JAX with its default preallocation: XLA reserves ~75% of the GPU at start-up and hands arrays out of that pool.
`gpumemtrace report` names the JAX/XLA allocator and explains the preallocated pool, not a leak.

JAX frees the arena when the interpreter exits normally (seen with jax 0.11 on the H200); `--exit-without-cleanup`
ends with os._exit instead, as a forked worker or a killed service does, so the arena is still reserved at exit.

usage: jax_prealloc.py [--exit-without-cleanup]"""
import os
import sys
import time

import jax
import jax.numpy as jnp

x = jnp.ones((4096, 4096), dtype=jnp.float32)
y = (x @ x).block_until_ready()
time.sleep(0.3)  # periodic samples of the pool
stats = jax.devices()[0].memory_stats() or {}
print(f"jax: bytes_in_use={stats.get('bytes_in_use')} pool_bytes={stats.get('pool_bytes')}", flush=True)
if "--exit-without-cleanup" in sys.argv[1:]:
    os._exit(0)  # no atexit: JAX's backend, and the arena with it, is never torn down
