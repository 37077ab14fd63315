// The benchmark control: pausing recording inside a profiled process, so that one process can be timed with
// and without the profiler's work in alternation (bench/torch_step_ab.py). Step times of separate
// processes differ by tens of percent on GPU machines; within one process they do not, which is what makes a
// 0.5% difference measurable at all.
//
// While paused every hook passes its call through unrecorded (recorder/guard.h), and a backend that costs the
// app something even then switches that off (CUPTI's callbacks: switch_capture, recorder/backend.h). The trace
// misses whatever happened then: an allocation freed during a pause stays live in the report. The trace says
// so (meta recording_pauses and recording_paused_ns, docs/trace-format.md) and `report` warns. Switch between
// NVTX ranges, not inside one: a range pushed before a pause and popped during it stays open in the trace. Not
// for production use.
//
// `gpumemtrace ctl` pauses and resumes through the same switch (recorder/control_channel.h), and `run --paused`
// starts with it set (pause_from_load, begin_paused_start): the report then treats what was alive at the pause's
// "pause" mark as unjudged (docs/trace-format.md, "Control marks").
#include <atomic>
#include <mutex>
#include <string>

#include "recorder/backend.h"
#include "recorder/control_channel.h"
#include "recorder/guard.h"
#include "recorder/recorder.h"
#include "recorder/settings.h"
#include "schema/trace_schema.h"

namespace gmt::recorder {
namespace {

std::mutex g_pause_lock;  // orders pauses and resumes from different threads; never taken by a hook
uint64_t g_pauses = 0;
uint64_t g_paused_ns = 0;
uint64_t g_paused_since_ns = 0;
bool g_paused_from_load = false;  // run --paused, until the first CUDA call dates the pause (begin_paused_start)

}  // namespace
}  // namespace gmt::recorder

using namespace gmt::recorder;

// Pauses (paused != 0) or resumes recording; returns the previous state (1: was paused).
extern "C" __attribute__((visibility("default"))) int gmt_set_recording_paused(int paused) {
  std::lock_guard lock(g_pause_lock);
  bool was = g_recording_paused.load(std::memory_order_relaxed);
  if (was == (paused != 0)) return was ? 1 : 0;
  uint64_t now = now_ns();
  HookScope scope;  // whatever the backend's switch calls into records nothing
  if (paused) {
    ++g_pauses;
    g_paused_since_ns = now;
    g_recording_paused.store(true, std::memory_order_relaxed);
    switch_capture(false);  // e.g. CUPTI's callbacks: a paused process runs as if unprofiled
  } else {
    switch_capture(true);
    g_recording_paused.store(false, std::memory_order_relaxed);
    register_exit_pool_sampling();  // run --paused: not at the writer's start (recorder.h says why)
    g_paused_ns += now - g_paused_since_ns;
  }
  // Written with the next batch; a pause still open at exit is counted up to its start only.
  set_meta_later(gmt::schema::meta::kRecordingPauses, std::to_string(g_pauses));
  set_meta_later(gmt::schema::meta::kRecordingPausedNs, std::to_string(g_paused_ns));
  return was ? 1 : 0;
}

extern "C" __attribute__((visibility("default"))) int gmt_recording_paused(void) {
  return g_recording_paused.load(std::memory_order_relaxed) ? 1 : 0;
}

namespace gmt::recorder {

void pause_from_load() {
  std::lock_guard lock(g_pause_lock);
  g_pauses = 1;
  g_paused_since_ns = settings().start_monotonic_ns;
  g_paused_from_load = true;
  g_recording_paused.store(true, std::memory_order_relaxed);
  // No meta and no writer yet: a process that never calls CUDA keeps no trace, as without --paused.
}

void begin_paused_start() {
  std::lock_guard lock(g_pause_lock);
  if (!g_paused_from_load) return;
  g_paused_from_load = false;
  if (!g_recording_paused.load(std::memory_order_relaxed)) return;  // resumed in-process before any CUDA call
  HookScope scope;  // whatever the backend's switch calls into records nothing
  g_paused_since_ns = now_ns();
  switch_capture(false);         // the backend has just started with its capture on
  record_control_mark("pause");  // the process's first event: starts the writer, its trace and control channel
  set_meta_later(gmt::schema::meta::kRecordingPauses, std::to_string(g_pauses));
  set_meta_later(gmt::schema::meta::kRecordingPausedNs, std::to_string(g_paused_ns));
}

}  // namespace gmt::recorder
