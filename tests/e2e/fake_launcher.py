"""A stand-in for torchrun/srun in tests: starts N copies of a command as "ranks" and waits for them all.

    python3 fake_launcher.py N -- command args...

Each copy gets RANK, LOCAL_RANK (= its rank: one host) and WORLD_SIZE, the variables torchrun sets; the
launcher exits with the first non-zero exit code of its ranks, else 0. The ranks are its children, as
torchrun's workers are, so `gpumemtrace run -- python3 fake_launcher.py ...` traces them as child processes.
"""
import os
import subprocess
import sys


def main():
    count = int(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1:]
    ranks = []
    for rank in range(count):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(count))
        ranks.append(subprocess.Popen(command, env=env))
    codes = [p.wait() for p in ranks]
    return next((c for c in codes if c != 0), 0)


if __name__ == "__main__":
    sys.exit(main())
