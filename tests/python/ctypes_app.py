"""A Python program that allocates through the CUDA runtime the way an extension module does: it resolves
cudaMalloc in the process's global scope (where an extension's PLT would find it) and calls it through
ctypes. CDLL releases the GIL around the call, PyDLL keeps it. Under `gpumemtrace run --simulate` the
runtime is the simulated one. The PY-LEAK markers name the lines the report must show.

usage: ctypes_app.py [PAIRS [DEPTH]]   (benchmark: time PAIRS cudaMalloc/cudaFree pairs, called DEPTH
                                        Python frames deep, instead of the leaks)
"""
import ctypes
import sys
import threading
import time

ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_GLOBAL)
NO_GIL = ctypes.CDLL(None)     # ctypes releases the GIL during the foreign call
WITH_GIL = ctypes.PyDLL(None)  # ... and keeps it here


def cuda_malloc(lib, size):
    pointer = ctypes.c_void_p()
    error = lib.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(size))  # PY-LEAK: cuda_malloc
    if error != 0:
        raise RuntimeError(f"cudaMalloc failed: {error}")
    return pointer.value


def cuda_free(pointer):
    NO_GIL.cudaFree(ctypes.c_void_p(pointer))


class Layer:
    def build(self, size):
        return cuda_malloc(NO_GIL, size)  # PY-LEAK: Layer.build


def build_model(layers):
    kept = []
    for _ in range(layers):
        kept.append(Layer().build(1000))  # PY-LEAK: build_model
    return kept


def leak_with_gil():
    return cuda_malloc(WITH_GIL, 3000)  # PY-LEAK: leak_with_gil


def thread_worker(size):
    cuda_malloc(NO_GIL, size)  # PY-LEAK: thread_worker


def temporary_buffers(count):
    for _ in range(count):
        cuda_free(cuda_malloc(NO_GIL, 512))


def timed_pairs(pairs, depth):
    if depth > 1:  # deeper Python stacks: more frames to read per allocation
        return timed_pairs(pairs, depth - 1)
    for _ in range(1000):  # warm-up: first-seen frames, caches, lazily created buffers
        cuda_free(cuda_malloc(NO_GIL, 256))
    start, start_cpu = time.perf_counter(), time.thread_time()
    for _ in range(pairs):
        cuda_free(cuda_malloc(NO_GIL, 256))
    elapsed, cpu = time.perf_counter() - start, time.thread_time() - start_cpu
    print(f"pairs={pairs} wall_ns_per_pair={elapsed / pairs * 1e9:.0f} cpu_ns_per_pair={cpu / pairs * 1e9:.0f}")


def main():
    if len(sys.argv) > 1:
        timed_pairs(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1)
        return
    temporary_buffers(5)
    build_model(3)  # PY-LEAK: main.build_model
    leak_with_gil()  # PY-LEAK: main.leak_with_gil
    threads = [threading.Thread(target=thread_worker, args=(size,)) for size in (7000, 9000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("truth: leaked_bytes=22000 leaked_allocations=6 failed_allocations=0")


if __name__ == "__main__":
    main()  # PY-LEAK: <module>
