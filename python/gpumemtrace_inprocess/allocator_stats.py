"""The framework allocators' own statistics, sampled into the trace's allocator_stats table (schema v6).

At the CUDA level a caching allocator shows only its segments: cached memory looks like a leak and the
fragmentation inside segments is invisible. The allocator itself knows both. Once the app has imported PyTorch,
CuPy or JAX *and* that framework has initialised CUDA, one daemon thread per process samples, for each device the
process uses:

- PyTorch: torch.cuda.memory_stats (allocated = in use, reserved, inactive split bytes, alloc retries, OOMs);
  and, through torch's out-of-memory observer, one sample at each torch.cuda.OutOfMemoryError with the request;
- CuPy: the default memory pool's used_bytes / total_bytes;
- JAX: each GPU device's memory_stats() (bytes_in_use; pool_bytes, the BFC pool, as reserved).

When: after each NVTX range at nesting depth 0 ends (a training step), at most once per 10 ms and per 400
durations of a sample (the last range end of a burst always sampled); otherwise every GMT_ALLOCATOR_SAMPLE_MS
(default 100; 0 turns sampling off) since the last sample; and once at interpreter exit. Cost: PyTorch's
statistics take ~145 us per device (H200, torch 2.11) with the GIL held, which the app's thread waits for. At
one sample per step that was 2-3% of a 4.5 ms inference step (bench/torch_step_ab.py on the H200); with the
gap of 400 sample durations, range-end samples take at most 0.25% of the time: steps longer than that gap are
each sampled, shorter ones every few steps. The thread waits for range ends inside the native library without
the GIL.

Never imports a framework, never initialises CUDA, never raises into the app: a failing part says so once on
stderr and switches itself off.
"""
import atexit
import ctypes
import math
import os
import sys
import threading
import time

from . import native, watch
from .environment import ALLOCATOR_SAMPLE_MS

# schema::FrameworkAllocator
TORCH_CACHING, TORCH_EXPANDABLE, TORCH_MALLOC_ASYNC, CUPY_POOL, JAX_XLA = 1, 2, 3, 4, 5
# schema::SampleTrigger
CADENCE, RANGE_END, OOM, EXIT = 1, 2, 3, 4

DEFAULT_PERIOD_MS = 100
MIN_GAP_S = 0.010       # at most one range-end sample per 10 ms ...
COST_FACTOR = 400       # ... and per 400 sample durations: range-end samples take at most 0.25% of the time
DEVICE_SCAN_S = 2.0     # how often PyTorch's devices are all looked at, to find those that came into use

_said = set()


def _say_once(key, message):
    if key in _said:
        return
    _said.add(key)
    try:
        sys.stderr.write(f"gpumemtrace: {message}\n")
    except Exception:
        pass


def _period_ms():
    text = os.environ.get(ALLOCATOR_SAMPLE_MS, "")
    if not text:
        return DEFAULT_PERIOD_MS
    try:
        value = int(text)
        if value < 0:
            raise ValueError
        return value
    except ValueError:
        _say_once("period", f"{ALLOCATOR_SAMPLE_MS}={text!r} is not a number of milliseconds; "
                            f"sampling the allocators every {DEFAULT_PERIOD_MS} ms")
        return DEFAULT_PERIOD_MS


def _none_if_missing(value):
    return -1 if value is None else int(value)


# ---- Frameworks -----------------------------------------------------------------------------------------------

def _torch_expandable_segments():
    for variable in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        for option in os.environ.get(variable, "").split(","):
            key, _, value = option.partition(":")
            if key.strip() == "expandable_segments":
                return value.strip().lower() == "true"
    return False


class TorchSource:
    """PyTorch's CUDA caching allocator (or its cudaMallocAsync backend)."""
    name = "PyTorch"

    def __init__(self, torch, sampler):
        self.torch = torch
        self.sampler = sampler
        self.allocator = TORCH_CACHING
        self.devices = set()
        self.next_scan = 0.0
        self.started = False

    def ready(self):
        return bool(self.torch.cuda.is_initialized())

    def start(self):
        cuda = self.torch.cuda
        backend = getattr(cuda, "get_allocator_backend", lambda: "native")()
        if backend == "cudaMallocAsync":
            self.allocator = TORCH_MALLOC_ASYNC
        elif _torch_expandable_segments():
            self.allocator = TORCH_EXPANDABLE
        attach = getattr(self.torch._C, "_cuda_attach_out_of_memory_observer", None)
        if attach is None:
            _say_once("torch-oom", "this PyTorch has no out-of-memory observer: OOMs are seen at the CUDA level only")
        else:
            attach(self.on_out_of_memory)

    def stats(self, device):
        nested = getattr(self.torch.cuda, "memory_stats_as_nested_dict", None)
        if nested is not None:  # skips memory_stats' flattening of every key
            s = nested(device)

            def current(key):
                value = s.get(key)
                return value.get("all", {}).get("current") if isinstance(value, dict) else None
        else:
            s = self.torch.cuda.memory_stats(device)

            def current(key):
                return s.get(key + ".all.current")
        reserved = current("reserved_bytes")
        if reserved is None:
            return None
        return (current("allocated_bytes") or 0, reserved, current("inactive_split_bytes"),
                s.get("num_alloc_retries"), s.get("num_ooms"))

    def devices_now(self, now, rescan=False):
        # Until a device is in use, every sample looks (a run shorter than DEVICE_SCAN_S after CUDA's init, which
        # found nothing in use yet, had no samples at all on the H200); and the exit sample always looks.
        if rescan or not self.devices or now >= self.next_scan:
            self.next_scan = now + DEVICE_SCAN_S
            for device in range(self.torch.cuda.device_count()):
                if device not in self.devices:
                    figures = self.stats(device)
                    if figures and figures[1] > 0:
                        self.devices.add(device)
        return sorted(self.devices)

    def on_out_of_memory(self, device, alloc_bytes, device_allocated, device_free):
        # Called by PyTorch on the allocating thread, with the GIL and without the allocator's lock, just before
        # it raises OutOfMemoryError. Never raise from here.
        try:
            self.devices.add(int(device))
            self.sampler.sample_device(self, int(device), OOM, request=int(alloc_bytes))
        except Exception as error:
            _say_once("torch-oom-sample", f"the PyTorch out-of-memory sample failed: {error!r}")


class CupySource:
    """CuPy's default device memory pool (one pool per device)."""
    name = "CuPy"
    allocator = CUPY_POOL

    def __init__(self, cupy, sampler):
        self.cupy = cupy
        self.started = False
        self.driver = None

    def _active_devices(self):
        # Asked of the driver the app loaded, so that nothing is initialised by us: no driver loaded or no cuInit
        # yet means no CuPy memory yet; a device's pool is read only once the app made the device's context.
        if self.driver is None:
            try:
                self.driver = ctypes.CDLL("libcuda.so.1", mode=getattr(os, "RTLD_NOLOAD", 0))
            except OSError:
                return []
        count = ctypes.c_int()
        if self.driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return []
        active = []
        for ordinal in range(count.value):
            handle, flags, running = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
            if (self.driver.cuDeviceGet(ctypes.byref(handle), ordinal) == 0 and
                    self.driver.cuDevicePrimaryCtxGetState(handle, ctypes.byref(flags), ctypes.byref(running)) == 0
                    and running.value):
                active.append(ordinal)
        return active

    def ready(self):
        return bool(self._active_devices())

    def start(self):
        pass

    def devices_now(self, now, rescan=False):
        return self._active_devices()

    def stats(self, device):
        pool = self.cupy.get_default_memory_pool()
        with self.cupy.cuda.Device(device):  # this thread only; the context exists already
            return pool.used_bytes(), pool.total_bytes(), None, None, None


class JaxSource:
    """JAX/XLA's allocator on each GPU device (BFC by default: the pool is preallocated)."""
    name = "JAX"
    allocator = JAX_XLA

    def __init__(self, jax, sampler):
        self.started = False

    @staticmethod
    def _gpu_devices():
        # The backends JAX already created: jax.devices() would create them (and preallocate the GPU) itself.
        bridge = sys.modules.get("jax._src.xla_bridge")
        backends = getattr(bridge, "_backends", None) or {}
        devices = []
        for platform, client in list(backends.items()):
            if platform in ("cuda", "gpu", "rocm"):
                devices.extend(client.local_devices())
        return devices

    def ready(self):
        return bool(self._gpu_devices())

    def start(self):
        pass

    def devices_now(self, now, rescan=False):
        return self._gpu_devices()

    def stats(self, device):
        s = device.memory_stats() or {}
        if "bytes_in_use" not in s:
            return None
        reserved = s.get("pool_bytes", s.get("bytes_reserved", s["bytes_in_use"]))
        return s["bytes_in_use"], max(reserved, s["bytes_in_use"]), None, None, None

    @staticmethod
    def ordinal(device):
        ordinal = getattr(device, "local_hardware_id", None)
        return device.id if ordinal is None else ordinal


# ---- The sampler ----------------------------------------------------------------------------------------------

class Sampler:
    def __init__(self, record, range_ends, wait_for_range_end, period_ms, recording_paused=None):
        self.record = record
        self.recording_paused = recording_paused or (lambda: 0)  # a benchmark's pause (recorder/pause.cpp)
        self.range_ends = range_ends
        self.wait_for_range_end = wait_for_range_end
        self.period_s = period_ms / 1000.0
        self.sources = []
        self.lock = threading.Lock()
        self.thread = None
        self.stopped = False
        self.last_sample = 0.0
        self.sample_cost_s = 0.0  # the CPU time of the last sample (its statistics are read with the GIL held)
        # Read here, on the app's thread: a range that ends before the sampler thread first runs still counts.
        self.seen_range_ends = range_ends()

    def add(self, source):
        with self.lock:
            self.sources.append(source)
        if self.thread is None:
            atexit.register(self.at_exit)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=self.after_fork_in_child)
            self.start_thread()

    def start_thread(self):
        self.thread = threading.Thread(target=self.run, name="gpumemtrace-allocator-stats", daemon=True)
        self.thread.start()

    def after_fork_in_child(self):
        # The parent's thread does not exist here; the child samples its own devices into its own trace.
        self.lock = threading.Lock()
        self.stopped = False
        self.seen_range_ends = self.range_ends()
        if self.sources:
            self.start_thread()

    def run(self):
        try:
            self.loop()
        except Exception as error:
            _say_once("thread", f"the allocator statistics sampler stopped: {error!r}")

    def loop(self):
        seen = self.seen_range_ends
        next_cadence = time.monotonic() + self.period_s
        while not self.stopped:
            now = time.monotonic()
            if now >= next_cadence:
                self.sample(CADENCE)
                next_cadence = max(next_cadence + self.period_s, time.monotonic())
                continue
            timeout_ms = max(1, math.ceil((next_cadence - now) * 1000))
            ends = self.wait_for_range_end(seen, timeout_ms)
            if ends == seen or self.stopped:
                continue
            now = time.monotonic()
            gap = self.last_sample + self.range_end_gap_s() - now
            if gap >= next_cadence - now:
                seen = ends  # the cadence's sample comes first, and stands for this range end
                continue
            if gap > 0:
                time.sleep(gap)  # ranges that end meanwhile share the sample below
            seen = self.range_ends()
            self.sample(RANGE_END)
            # The cadence fills the time between samples; right after one it would only add cost.
            next_cadence = max(next_cadence, self.last_sample + self.period_s)

    def range_end_gap_s(self):
        """The least time between the starts of two range-end samples: their cost bounded to 1/COST_FACTOR."""
        return max(MIN_GAP_S, COST_FACTOR * self.sample_cost_s)

    def at_exit(self):
        self.stopped = True  # the exit sample is the last: a periodic one waiting for the lock is dropped
        self.sample(EXIT)

    def sample(self, trigger):
        if trigger != EXIT and self.recording_paused():
            return  # nothing is recorded now: not even the statistics' own cost is paid
        with self.lock:
            if self.stopped and trigger != EXIT:
                return
            self.last_sample = time.monotonic()
            cost_s = 0.0
            for source in list(self.sources):
                try:
                    if not source.started:
                        if not source.ready():
                            continue
                        source.started = True
                        source.start()
                    for device in source.devices_now(self.last_sample, rescan=trigger == EXIT):
                        # This thread's CPU time: what the statistics cost (with the GIL held), without the
                        # waits for the GIL that a busy app makes this thread do.
                        started = time.thread_time()
                        self.sample_locked(source, device, trigger, None)
                        cost_s += time.thread_time() - started
                except Exception as error:
                    self.drop(source, error)
            self.sample_cost_s = cost_s

    def sample_device(self, source, device, trigger, request=None):
        with self.lock:
            try:
                self.sample_locked(source, device, trigger, request)
            except Exception as error:
                self.drop(source, error)

    def sample_locked(self, source, device, trigger, request):
        figures = source.stats(device)
        if figures is None:
            return
        ordinal = source.ordinal(device) if hasattr(source, "ordinal") else device
        in_use, reserved, inactive_split, retries, ooms = figures
        self.record(int(ordinal), source.allocator, trigger, int(in_use), int(reserved),
                    _none_if_missing(inactive_split), _none_if_missing(retries), _none_if_missing(ooms),
                    _none_if_missing(request))

    def drop(self, source, error):
        if source in self.sources:
            self.sources.remove(source)
        _say_once(f"source-{source.name}", f"{source.name} allocator statistics are off: {error!r}")


_sampler = None


def _polling_wait(range_ends):
    def wait(seen, timeout_ms):  # a library without the blocking wait: poll
        deadline = time.monotonic() + timeout_ms / 1000.0
        while time.monotonic() < deadline:
            ends = range_ends()
            if ends != seen:
                return ends
            time.sleep(MIN_GAP_S)
        return range_ends()
    return wait


def start():
    """Arms the sampler: it starts with the first of torch, cupy or jax that the app imports."""
    global _sampler
    if _sampler is not None:
        return
    period_ms = _period_ms()
    if period_ms == 0:
        return
    c_int64, c_uint64 = ctypes.c_int64, ctypes.c_uint64
    record = native.function("gmt_record_allocator_sample", ctypes.c_int,
                             [ctypes.c_int, ctypes.c_int, ctypes.c_int, c_uint64, c_uint64, c_int64, c_int64, c_int64,
                              c_int64])
    range_ends = native.function("gmt_top_level_range_ends", c_uint64, [])
    wait = native.function("gmt_wait_top_level_range_end", c_uint64, [c_uint64, ctypes.c_int])
    if record is None or range_ends is None:
        _say_once("native", "this libgpumemtrace has no allocator statistics: they are off")
        return
    paused = native.function("gmt_recording_paused", ctypes.c_int, [])
    _sampler = Sampler(record, range_ends, wait or _polling_wait(range_ends), period_ms, paused)
    for module, source in (("torch", TorchSource), ("cupy", CupySource), ("jax", JaxSource)):
        watch.when_imported(module, lambda imported, source=source: _sampler.add(source(imported, _sampler)))
