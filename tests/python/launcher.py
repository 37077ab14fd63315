"""Starts the given Python script in N worker processes at once and waits for them, as torchrun does: the
launcher itself never touches CUDA. usage: launcher.py N SCRIPT [ARGS...]"""
import subprocess
import sys

workers = [subprocess.Popen([sys.executable, *sys.argv[2:]]) for _ in range(int(sys.argv[1]))]
sys.exit(max(worker.wait() for worker in workers))
