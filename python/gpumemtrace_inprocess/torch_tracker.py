"""PyTorch's tensors, recorded as they are allocated (on by default; `run --no-torch-blocks`, GMT_TORCH_BLOCKS=0,
switches it off).

At the CUDA level PyTorch shows only its segments, which its caching allocator keeps until exit: a leak of tensors
looks like segment growth, and memory that is merely cached looks leaked. PyTorch calls the trace trackers attached
to its caching allocator on every action (a block handed to a tensor, given back, a segment taken from or returned
to CUDA, an out-of-memory error), whether or not its own memory history is on. Our tracker is a small C++ bridge
(torch_bridge.cpp) compiled against the app's own torch, since the tracker's C++ types follow the torch build. It
forwards each action to the preloaded library (recorder/framework_blocks.h), which records it with the thread's
stack, Python frames included, like any CUDA allocation. No ring, no drain thread, no Python on the allocator's
path.

When: the bridge is found or built when the app imports torch (before CUDA is initialized, never inside its
initialization): once per torch build, into a per-user cache (GMT_TORCH_BRIDGE_CACHE, else
$XDG_CACHE_HOME/gpumemtrace or ~/.cache/gpumemtrace), under a file lock so that the ranks of a job build it once. It
is attached at CUDA's lazy initialization (torch.cuda._lazy_call), after the allocator exists.

Anything that prevents it (no C++ compiler, a torch without headers, another allocator backend such as
cudaMallocAsync or a pluggable allocator, a build that fails) leaves PyTorch's memory at the CUDA level, says why in
one stderr line and in the trace (meta tensor_blocks = 0, tensor_blocks_note), and never stops the app.
"""
import atexit
import ctypes
import fcntl
import glob
import hashlib
import os
import shlex
import shutil
import struct
import subprocess
import sys
import time

from . import native
from .environment import TORCH_BLOCKS as ENV_ENABLED
from .environment import TORCH_BRIDGE_CACHE as ENV_CACHE

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_bridge.cpp")
BUILD_TIMEOUT_S = 600
_NOTE_SIZE = 512


class BridgeUnavailable(Exception):
    """Why the bridge cannot be had in this process: one sentence for the user."""


def enabled():
    return os.environ.get(ENV_ENABLED, "1") != "0"


def _say(message):
    sys.stderr.write(f"gpumemtrace: {message}\n")


def _state_function():
    return native.function("gmt_torch_blocks_state", None, [ctypes.c_int, ctypes.c_char_p])


def _off(reason):
    """Block-level tracking is off in this process: say why, once, on stderr and in the trace."""
    _say(f"PyTorch's tensors are not tracked ({reason}); its memory is reported at the CUDA level only")
    state = _state_function()
    if state is not None:
        state(0, reason.encode("utf-8", "replace"))


def cache_dir():
    configured = os.environ.get(ENV_CACHE)
    if configured:
        return configured
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpumemtrace")


def _cuda_include_dirs():
    """Where cuda_runtime_api.h is (torch's CUDA headers include it): the toolkit, else a CUDA runtime wheel."""
    candidates = []
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            candidates.append(os.path.join(os.environ[variable], "include"))
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include"))
    candidates.append("/usr/local/cuda/include")
    for entry in sys.path:
        candidates.extend(sorted(glob.glob(os.path.join(entry or ".", "nvidia", "*", "include"))))
    return [c for c in candidates if os.path.isfile(os.path.join(c, "cuda_runtime_api.h"))][:1]


def _torch_paths(torch):
    root = os.path.dirname(os.path.abspath(torch.__file__))
    include, lib = os.path.join(root, "include"), os.path.join(root, "lib")
    if not os.path.isfile(os.path.join(include, "c10", "cuda", "CUDACachingAllocator.h")):
        raise BridgeUnavailable(f"torch {torch.__version__} has no C++ headers (c10/cuda/CUDACachingAllocator.h) "
                                f"under {include}")
    return include, lib


def _cxx11_abi(torch):
    return int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))


def bridge_key(torch):
    """What the bridge's build depends on: the torch build, its C++ ABI, and the bridge's own source."""
    with open(SOURCE, "rb") as f:
        source_hash = hashlib.sha256(f.read()).hexdigest()[:12]
    git = (getattr(getattr(torch, "version", None), "git_version", "") or "")[:12]
    version = "".join(c if c.isalnum() or c in ".-_" else "_" for c in torch.__version__)
    return f"torch-bridge-{version}-{git or 'nogit'}-abi{_cxx11_abi(torch)}-{source_hash}"


def build_command(torch, output):
    include, lib = _torch_paths(torch)
    compiler = shlex.split(os.environ.get("CXX", "")) or [shutil.which("c++") or shutil.which("g++") or "c++"]
    command = [*compiler, "-O2", "-std=c++17", "-shared", "-fPIC", "-w",
               f"-D_GLIBCXX_USE_CXX11_ABI={_cxx11_abi(torch)}", f"-I{include}"]
    command += [f"-I{d}" for d in _cuda_include_dirs()]
    command += [SOURCE, f"-L{lib}", "-lc10_cuda", "-lc10", f"-Wl,-rpath,{lib}", "-o", output]
    return command


def bridge_library(torch):
    """The bridge for this torch: from the cache, or built into it once (other processes wait on the lock)."""
    directory = cache_dir()
    key = bridge_key(torch)
    path = os.path.join(directory, key + ".so")
    if os.path.isfile(path):
        return path
    try:
        os.makedirs(directory, exist_ok=True)
        lock = open(os.path.join(directory, key + ".lock"), "w")
    except OSError as error:
        raise BridgeUnavailable(f"the bridge's cache {directory} cannot be written: {error.strerror}")
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another rank may be building it: wait, then use its build
        if os.path.isfile(path):
            return path
        temporary = f"{path}.{os.getpid()}.tmp"
        command = build_command(torch, temporary)
        _say(f"building the PyTorch bridge for torch {torch.__version__} (once per torch build, into {directory})")
        started = time.monotonic()
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        except FileNotFoundError:
            raise BridgeUnavailable(f"no C++ compiler to build the PyTorch bridge ({command[0]} not found; set CXX)")
        except subprocess.TimeoutExpired:
            raise BridgeUnavailable(f"building the PyTorch bridge took over {BUILD_TIMEOUT_S} s")
        if result.returncode != 0 or not os.path.isfile(temporary):
            log = os.path.join(directory, key + ".log")
            with open(log, "w") as f:
                f.write(" ".join(shlex.quote(part) for part in command) + "\n" + result.stdout + result.stderr)
            errors = [line for line in result.stderr.splitlines() if "error" in line]
            first = (errors or result.stderr.strip().splitlines() or ["no output"])[0]
            raise BridgeUnavailable(f"building the PyTorch bridge failed: {first.strip()[:200]} (log: {log})")
        os.replace(temporary, path)
        _say(f"built the PyTorch bridge in {time.monotonic() - started:.1f} s")
        return path


def attach(torch, path):
    """At CUDA's lazy initialization: load the bridge and attach its tracker."""
    backend = getattr(torch.cuda, "get_allocator_backend", lambda: "native")()
    if backend != "native":
        return _off(f"PyTorch's allocator backend is {backend}, which calls no trace trackers; "
                    f"PYTORCH_CUDA_ALLOC_CONF=backend:native tracks tensors")
    record = native.function("gmt_torch_allocator_action_in_pool", None, [])
    if record is None:
        return _off("the preloaded library has no gmt_torch_allocator_action_in_pool")
    bridge = ctypes.CDLL(path)
    bridge.gmt_torch_bridge_attach.restype = ctypes.c_int
    bridge.gmt_torch_bridge_attach.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    why = ctypes.create_string_buffer(_NOTE_SIZE)
    code = bridge.gmt_torch_bridge_attach(ctypes.cast(record, ctypes.c_void_p), why, _NOTE_SIZE)
    if code != 0:
        return _off(why.value.decode("utf-8", "replace") or f"the bridge refused ({code})")
    _state_function()(1, b"")
    stop = native.function("gmt_torch_blocks_stop", None, [])
    if stop is not None:
        # Registered now, after torch's own handlers: runs before them (atexit is last in, first out). What is
        # alive then is what the app held; the interpreter's teardown frees the rest afterwards.
        atexit.register(stop)


# recorder/framework_blocks.h, enum gmt_torch_call.
_EMPTY_CACHE, _SET_SETTINGS, _MEMORY_FRACTION = 1, 2, 3
_SETTINGS_VARIABLES = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")  # the order c10's AllocatorConfig reads them


def _record_allocator_facts(torch):
    """What a replay of the allocator needs (gpumemtrace whatif): its settings at start, torch's version."""
    facts = native.function("gmt_torch_allocator_facts", None, [ctypes.c_char_p] * 4)
    if facts is None:
        return
    variable = next((name for name in _SETTINGS_VARIABLES if name in os.environ), "")
    conf = os.environ.get(variable, "") if variable else ""
    git = getattr(getattr(torch, "version", None), "git_version", "") or ""
    facts(conf.encode(), variable.encode(), str(torch.__version__).encode(), str(git).encode())


def _double_bits(value):
    """The fraction as the bits of its double: the replay computes PyTorch's allowed maximum from it exactly."""
    return struct.unpack("<Q", struct.pack("<d", float(value)))[0]


def _wrap_allocator_calls(torch):
    """Records empty_cache(), _set_allocator_settings() and set_per_process_memory_fraction() as they are called,
    before they run (the segments they free follow them in the trace). The app's own results are unchanged: each
    wrapper calls the original with the same arguments and returns what it returns."""
    call = native.function("gmt_torch_allocator_call", None,
                           [ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_char_p])
    if call is None:
        return
    cuda = torch.cuda
    memory = getattr(cuda, "memory", None)

    def note(kind, device=0, value=0, text=b""):
        try:
            call(kind, device, value, text)
        except Exception:  # never the app's error
            pass

    def wrap(owners, name, before):
        original = next((getattr(o, name) for o in owners if o is not None and hasattr(o, name)), None)
        if original is None or getattr(original, "_gmt_wrapped", False):
            return

        def wrapper(*args, **kwargs):
            before(*args, **kwargs)
            return original(*args, **kwargs)

        wrapper._gmt_wrapped = True
        wrapper.__wrapped__ = original
        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        for owner in owners:
            if owner is not None and getattr(owner, name, None) is original:
                setattr(owner, name, wrapper)

    def fraction_device(device):
        try:
            return cuda._utils._get_device_index(device) if device is not None else cuda.current_device()
        except Exception:
            return 0

    wrap((cuda, memory), "empty_cache", lambda *a, **k: note(_EMPTY_CACHE))
    wrap((memory,), "_set_allocator_settings",
         lambda settings, *a, **k: note(_SET_SETTINGS, text=str(settings).encode()))
    wrap((cuda, memory), "set_per_process_memory_fraction",
         lambda fraction, device=None, *a, **k: note(_MEMORY_FRACTION, fraction_device(device),
                                                     _double_bits(fraction)))


def on_torch_imported(torch):
    """watch.when_imported('torch', ...): find or build the bridge now, attach it at CUDA's initialization."""
    cuda = getattr(torch, "cuda", None)
    lazy_call = getattr(cuda, "_lazy_call", None)
    if lazy_call is None:
        return _off(f"torch {getattr(torch, '__version__', '?')} has no torch.cuda._lazy_call")
    # Now, before the app's own `from torch.cuda import empty_cache` can take the unwrapped function.
    _record_allocator_facts(torch)
    _wrap_allocator_calls(torch)
    try:
        path = bridge_library(torch)
    except BridgeUnavailable as reason:
        return _off(str(reason))

    def attach_safely():
        # Runs inside torch.cuda's lazy initialization: an exception here would become the app's error.
        try:
            attach(torch, path)
        except Exception as error:
            _off(f"the PyTorch bridge could not be attached: {error!r}")

    lazy_call(attach_safely)  # at once when CUDA is initialized already
