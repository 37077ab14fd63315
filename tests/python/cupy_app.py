"""An app for the CuPy tracking tests, run under `gpumemtrace run --simulate` with the fake cupy of fixtures_cupy/ on
PYTHONPATH: each step makes a 1 MiB scratch array it drops at once (its chunk stays cached in the pool) and keeps a
2 MiB array (the leak the report must name at its line).

usage: cupy_app.py STEPS
"""
import sys

import cupy  # the fixture, not CuPy

STEPS = int(sys.argv[1])
kept = []
for step in range(STEPS):
    scratch = cupy.empty(1 << 20)  # SCRATCH-LINE
    del scratch
    kept.append(cupy.empty(2 << 20))  # KEPT-LINE
pool = cupy.get_default_memory_pool()
print("pool_total", pool.total_bytes())
print("pool_used", pool.used_bytes())
print("done", True)
