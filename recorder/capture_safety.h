// Stream capture (how CUDA graphs are built) and the profiler's own driver calls.
//
// While a stream captures in global mode (the default of cudaStreamBeginCapture), CUDA forbids "potentially
// unsafe" calls, those that are not stream-ordered, on every thread of the process, and a forbidden call
// invalidates the capture: the app's cudaStreamEndCapture then fails ("operation failed due to a previous error
// during capture"). In thread-local mode the capturing thread is bound the same way. The profiler's own queries (a
// pool's usage, the free memory after an out-of-memory error, a device's name, an imported range) are such calls,
// and they run on the app's threads and the writer thread. So every one of them runs inside a RelaxedCaptureScope:
// the calling thread is switched to relaxed mode, where such calls are allowed and break no capture, and back
// (cuThreadExchangeStreamCaptureMode, the push-pop use the CUDA documentation gives for libraries).
//
// An allocation made on a capturing stream is not an allocation yet: it becomes a memory node of the graph, and
// the memory is allocated each time the graph is launched. stream_is_capturing() tells the event path so, at the
// cost of one atomic load while no stream of the process captures (the capture wrappers and callbacks count
// captures begun and ended).
#pragma once

#include <cstdint>

namespace gmt::recorder {

class RelaxedCaptureScope {
 public:
  RelaxedCaptureScope();
  ~RelaxedCaptureScope();
  RelaxedCaptureScope(const RelaxedCaptureScope&) = delete;
  RelaxedCaptureScope& operator=(const RelaxedCaptureScope&) = delete;

 private:
  int previous_mode_ = 0;
  bool exchanged_ = false;
};

// Called by the backend that counts (driver hooks or CUPTI) after a capture began on some stream, and after a
// cuStreamEndCapture returned `result`: a capture counts as ended when the call ended it (success, or the capture
// had been invalidated or left unjoined); a call on a stream that was not capturing, or from the wrong thread,
// ends nothing. The count is a hint that only ever errs high: a high count costs a driver query per
// stream-ordered event, never a wrong answer.
void note_capture_begun();
void note_capture_end_returned(int result);

// Whether `stream` is capturing now (cuStreamIsCapturing, asked only while some capture is in progress).
bool stream_is_capturing(uint64_t stream);

// For tests: the count of captures in progress.
int captures_in_progress();

}  // namespace gmt::recorder
