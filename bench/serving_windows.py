"""What a watcher beside a service costs it, measured inside one run of samples/torch_serving.py: the sample prints
`tick: monotonic=T requests=N` lines (its TICK_S argument), and a watcher (`gpumemtrace top`) is switched on in
every other window of the run. Separate runs of the loop spread by up to 15% on one machine (2026-12-06, 21268ac),
more than a 1% cost, and the rate also wanders within a run (20 s windows of one H100 run: 434 to 638 requests/s,
797c21e). Each on-window is compared with the mean of the off-windows either side, so a linear drift cancels; the A/A
control compares each inner off-window with the off-windows two away, the same way, and says how much wandering is
left. Used by tests/gpu/test_gpu_top.py and bench/torch_serving_aggregate.py."""
import re
import resource
import subprocess
import threading
import time

TICK = re.compile(r"tick: monotonic=([\d.]+) requests=(\d+)")


class ServiceOutput:
    """Drains a running service's stdout and stderr in threads (a full pipe would stall it): the ticks as
    (monotonic, requests), every other stdout line and the stderr text kept."""

    def __init__(self, process):
        self.ticks, self.lines, self.errors = [], [], []
        self.readers = [threading.Thread(target=self._stdout, args=(process.stdout,), daemon=True),
                        threading.Thread(target=lambda: self.errors.append(process.stderr.read()), daemon=True)]
        for reader in self.readers:
            reader.start()

    def _stdout(self, stream):
        for line in stream:
            found = TICK.match(line)
            if found:
                self.ticks.append((float(found.group(1)), int(found.group(2))))
            else:
                self.lines.append(line)

    def first_tick(self, process, timeout=180.0):
        """The monotonic time of the first tick (the model is loaded and serving), or None if the service ended or
        printed none within TIMEOUT."""
        deadline = time.monotonic() + timeout
        while not self.ticks and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
        return self.ticks[0][0] if self.ticks else None

    def finish(self, timeout=60):
        for reader in self.readers:
            reader.join(timeout=timeout)
        return "".join(self.lines), "".join(self.errors)


class Windows:
    """What toggle_watcher did: each window's span (from SETTLE_S past its start to its end), and per on-window the
    watcher's exit code, the CPU seconds it used and (toggle_top) the frames it drew."""

    def __init__(self):
        self.spans, self.exits, self.cpu_s, self.frames = [], [], [], []


def toggle_watcher(start_watcher, first, windows, window_s, settle_s=0.5, until=None):
    """Runs up to WINDOWS windows of WINDOW_S seconds from monotonic time FIRST, the watcher on in the odd ones:
    start_watcher(index) returns a Popen, which is sent SIGTERM at its window's end. A watcher may take a while to
    end (a refresh under way finishes first): its window lasts until it has, and the next one starts then, so no
    off-window holds a watcher's last work. A window that would end after UNTIL (the service's end) is not begun,
    and the windows end on an off-window. Reaps no other child meanwhile (the CPU time is RUSAGE_CHILDREN's)."""
    done = Windows()
    time.sleep(max(0.0, first - time.monotonic()))
    begin = first
    for index in range(windows):
        begin = max(begin, time.monotonic())
        if until is not None and begin + window_s > until:
            break
        cpu_before = children_cpu_s()
        watcher = start_watcher(index) if index % 2 else None
        time.sleep(max(0.0, begin + window_s - time.monotonic()))
        if watcher:
            watcher.terminate()
            done.exits.append(watcher.wait(timeout=120))
            done.cpu_s.append(children_cpu_s() - cpu_before)
        end = time.monotonic()
        done.spans.append((begin + settle_s, end))
        begin = end
    if len(done.spans) % 2 == 0 and done.spans:
        done.spans.pop()  # its watcher ran; only the windows either side of an on-window compare it
    return done


def toggle_top(cli, trace, log_prefix, first, windows, window_s, until):
    """toggle_watcher with `gpumemtrace top --interval 1 TRACE` as the watcher, each one's output in
    LOG_PREFIX-INDEX.txt, counted into the frames it drew."""
    logs = []

    def start_top(index):
        logs.append(open(f"{log_prefix}-{index}.txt", "w"))
        return subprocess.Popen([cli, "top", "--interval", "1", trace], stdout=logs[-1], stderr=subprocess.STDOUT)

    done = toggle_watcher(start_top, first, windows, window_s, until=until)
    for log in logs:
        log.close()
        with open(log.name) as f:
            done.frames.append(len(re.findall(r"^pid \d+ ", f.read(), re.M)))
    return done


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def rate_between(ticks, begin, end):
    """Requests per second from the first tick at or after BEGIN to the last at or before END."""
    inside = [tick for tick in ticks if begin <= tick[0] <= end]
    if len(inside) < 2:
        raise ValueError(f"fewer than two ticks between {begin:.2f} and {end:.2f} (ticks {ticks[:2]}..{ticks[-2:]})")
    (t0, n0), (t1, n1) = inside[0], inside[-1]
    return (n1 - n0) / (t1 - t0)


def window_ratio(rates, indexes, distance):
    """Mean over INDEXES of rate / mean(rate DISTANCE before, rate DISTANCE after) - 1; NaN without INDEXES (an A/A
    control needs at least five windows)."""
    ratios = [rates[i] / ((rates[i - distance] + rates[i + distance]) / 2) for i in indexes]
    return sum(ratios) / len(ratios) - 1 if ratios else float("nan")


def watcher_cost(ticks, spans):
    """(cost, A/A control, the windows' rates) for windows off, on, off, ..., off."""
    rates = [rate_between(ticks, begin, end) for begin, end in spans]
    windows = len(rates)
    return window_ratio(rates, range(1, windows, 2), 1), window_ratio(rates, range(2, windows - 2, 2), 2), rates
