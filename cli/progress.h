// A one-line progress indicator on stderr for long steps (symbolizing, analyzing a big trace). It draws
// only when stderr is a terminal, so logs and pipes never get carriage returns; it redraws at most ten
// times a second and erases its line when done, so what follows starts on a clean line.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gmt::cli {

class Progress {
 public:
  // Enabled when stderr is a terminal and `quiet` is false.
  explicit Progress(std::string label, bool quiet = false);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // "gpumemtrace: <label>: 45% (450000/1000000 <unit>)"; without a percentage when total is 0 or below done.
  void update(uint64_t done, uint64_t total, const char* unit);
  // Erases the line (once; the destructor calls it too).
  void finish();

  bool enabled() const { return enabled_; }

 private:
  std::string label_;
  bool enabled_ = false;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace gmt::cli
