#include "analysis/format.h"

#include <fmt/core.h>

#include <cstdlib>

namespace gmt::analysis {

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes) / 1024.0;
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(kUnits)) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

std::string format_bytes_exact(uint64_t bytes) {
  if (bytes < 1024) return format_bytes(bytes);
  return fmt::format("{} ({} B)", format_bytes(bytes), bytes);
}

std::string count_of(uint64_t count, const char* singular, const char* plural_form) {
  return fmt::format("{} {}", count, count == 1 ? singular : plural_form);
}

std::string device_name(int64_t device) {
  return device >= 0 ? fmt::format("device {}", device) : std::string("host memory");
}

std::string format_duration(int64_t ns) {
  if (ns < 0) {
    // Negating INT64_MIN overflows; such a value is absurd anyway, so clamping by one ns is harmless.
    return "-" + format_duration(ns == INT64_MIN ? INT64_MAX : -ns);
  }
  if (ns < 1'000) return fmt::format("{} ns", ns);
  double value = static_cast<double>(ns);
  if (ns < 1'000'000) return fmt::format("{:.1f} us", value / 1e3);
  if (ns < 1'000'000'000) return fmt::format("{:.2f} ms", value / 1e6);
  if (ns < 60'000'000'000) return fmt::format("{:.3f} s", value / 1e9);
  int64_t minutes = ns / 60'000'000'000;
  double seconds = static_cast<double>(ns % 60'000'000'000) / 1e9;
  return fmt::format("{} min {:04.1f} s", minutes, seconds);
}

std::string format_pc(uint64_t pc) { return fmt::format("{:#x}", pc); }

std::string path_basename(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos || slash + 1 == path.size()) return path;
  return path.substr(slash + 1);
}

std::string cuda_error_name(int64_t code) {
  switch (code) {
    case 0: return "cudaSuccess";
    case 1: return "cudaErrorInvalidValue";
    case 2: return "cudaErrorMemoryAllocation";
    case 3: return "cudaErrorInitializationError";
    case 4: return "cudaErrorCudartUnloading";
    case 35: return "cudaErrorInsufficientDriver";
    case 46: return "cudaErrorDevicesUnavailable";
    case 100: return "cudaErrorNoDevice";
    case 101: return "cudaErrorInvalidDevice";
    case 201: return "cudaErrorDeviceUninitialized";
    case 400: return "cudaErrorInvalidResourceHandle";
    case 700: return "cudaErrorIllegalAddress";
    case 709: return "cudaErrorContextIsDestroyed";
    case 801: return "cudaErrorNotSupported";
    case 999: return "cudaErrorUnknown";
    default: return fmt::format("error {}", code);
  }
}

}  // namespace gmt::analysis
