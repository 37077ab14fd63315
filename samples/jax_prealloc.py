"""JAX with its default preallocation: XLA reserves ~75% of the GPU at start-up and hands arrays out of that pool.
`gpumemtrace report` names the JAX/XLA allocator and explains the preallocated pool, not a leak."""
import time

import jax
import jax.numpy as jnp

x = jnp.ones((4096, 4096), dtype=jnp.float32)
y = (x @ x).block_until_ready()
time.sleep(0.3)  # periodic samples of the pool
stats = jax.devices()[0].memory_stats() or {}
print(f"jax: bytes_in_use={stats.get('bytes_in_use')} pool_bytes={stats.get('pool_bytes')}", flush=True)
