#include "cli/progress.h"

#include <unistd.h>

#include <fmt/core.h>

namespace gmt::cli {

Progress::Progress(std::string label, bool quiet)
    : label_(std::move(label)), enabled_(!quiet && isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { finish(); }

void Progress::update(uint64_t done, uint64_t total, const char* unit) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100) && done < total) return;
  last_draw_ = now;
  drawn_ = true;
  // \33[K erases the rest of the line, in case the previous draw was longer.
  if (total > 0 && done <= total) {
    fmt::print(stderr, "\rgpumemtrace: {}: {}% ({}/{} {})\33[K", label_, done * 100 / total, done, total, unit);
  } else {
    fmt::print(stderr, "\rgpumemtrace: {}: {} {}\33[K", label_, done, unit);
  }
  std::fflush(stderr);
}

void Progress::finish() {
  if (!drawn_) return;
  drawn_ = false;
  fmt::print(stderr, "\r\33[K");
  std::fflush(stderr);
}

}  // namespace gmt::cli
