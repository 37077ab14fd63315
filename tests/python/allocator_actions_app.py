"""Hands the recorder a scripted sequence of PyTorch caching-allocator actions through the entry points PyTorch's
bridge calls (recorder/framework_blocks.h), as `gpumemtrace run --simulate -- python allocator_actions_app.py`
starts it: no PyTorch needed.

`sequence`: what emptyCache makes of a block that waited for another stream: the block let go (FREE_REQUESTED),
then torch.cuda.empty_cache() called, and inside it the block's completion followed by its segment's release; and
before it, a block let go and completed at once.
`concurrent N`: one thread lets N blocks go under a lock of its own (as PyTorch's actions come under the device's
allocator lock), each completed at the next action, while another thread calls empty_cache() without that lock,
as Python does. Block i is at BASE + i * 4096 with size i * 512 and stream i, so that a request recorded with
another request's fields shows."""
import ctypes
import os
import sys
import threading

ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE = 1, 2, 3, 4, 5  # GMT_TORCH_*
EMPTY_CACHE = 1  # GMT_TORCH_EMPTY_CACHE
STREAM = 0
SMALL_SEGMENT, SMALL_BLOCK, SMALL_BYTES = 0x7F0000000000, 0x7F0000000000, 512
LARGE_SEGMENT, LARGE_BYTES = 0x7F0010000000, 20 << 20
NEXT_SEGMENT = 0x7F0020000000


def entry_points():
    library = ctypes.CDLL(os.environ["GMT_LIBRARY"], mode=ctypes.RTLD_GLOBAL | os.RTLD_NOLOAD)
    action = library.gmt_torch_allocator_action
    action.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
    action.restype = None
    call = library.gmt_torch_allocator_call
    call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_char_p]
    call.restype = None
    facts = library.gmt_torch_allocator_facts
    facts.argtypes = [ctypes.c_char_p] * 4
    facts.restype = None
    facts(b"", b"", b"2.11.0+cu130", b"70d99e998b4955e0049d13a98d77ae1b14db1f45")
    state = library.gmt_torch_blocks_state
    state.argtypes = [ctypes.c_int, ctypes.c_char_p]
    state.restype = None
    state(1, None)  # attached, as the bridge says when it is
    return action, call


def sequence():
    action, call = entry_points()
    # A small block let go and completed at once: its request is no event of its own.
    action(SEGMENT_ALLOC, 0, SMALL_SEGMENT, 2 << 20, STREAM)
    action(ALLOC, 0, SMALL_BLOCK, SMALL_BYTES, STREAM)
    action(FREE_REQUESTED, 0, SMALL_BLOCK, SMALL_BYTES, STREAM)
    action(FREE_COMPLETED, 0, SMALL_BLOCK, SMALL_BYTES, STREAM)
    # A large block that another stream used: let go, then empty_cache(), which completes it and frees its segment.
    action(SEGMENT_ALLOC, 0, LARGE_SEGMENT, LARGE_BYTES, STREAM)
    action(ALLOC, 0, LARGE_SEGMENT, LARGE_BYTES, STREAM)
    action(FREE_REQUESTED, 0, LARGE_SEGMENT, LARGE_BYTES, STREAM)
    call(EMPTY_CACHE, -1, 0, None)
    action(FREE_COMPLETED, 0, LARGE_SEGMENT, LARGE_BYTES, STREAM)
    action(SEGMENT_FREE, 0, LARGE_SEGMENT, LARGE_BYTES, STREAM)
    action(SEGMENT_FREE, 0, SMALL_SEGMENT, 2 << 20, STREAM)
    # The next request takes a segment of its own.
    action(SEGMENT_ALLOC, 0, NEXT_SEGMENT, LARGE_BYTES, STREAM)
    action(ALLOC, 0, NEXT_SEGMENT, LARGE_BYTES, STREAM)


BASE = 0x7F1000000000


def concurrent(blocks):
    action, call = entry_points()
    allocator_lock = threading.Lock()
    done = threading.Event()

    def let_go():
        for i in range(1, blocks + 1):
            with allocator_lock:
                action(ALLOC, 0, BASE + i * 4096, i * 512, i)
            with allocator_lock:
                action(FREE_REQUESTED, 0, BASE + i * 4096, i * 512, i)
            with allocator_lock:  # another block's action: the request above was a deferred one
                action(ALLOC, 0, BASE + (blocks + 1) * 4096, 512, 0)
            with allocator_lock:
                action(FREE_COMPLETED, 0, BASE + i * 4096, 0, i)
                action(FREE_REQUESTED, 0, BASE + (blocks + 1) * 4096, 512, 0)
                action(FREE_COMPLETED, 0, BASE + (blocks + 1) * 4096, 0, 0)
        done.set()

    worker = threading.Thread(target=let_go)
    worker.start()
    while not done.is_set():  # empty_cache() as Python calls it: without the allocator's lock
        call(EMPTY_CACHE, -1, 0, None)
    worker.join()


if __name__ == "__main__":
    if sys.argv[1] == "sequence":
        sequence()
    else:
        concurrent(int(sys.argv[2]))
    print("done True")
