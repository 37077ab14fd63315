// Human-readable formatting shared by the renderers: sizes, durations, CUDA error codes.
#pragma once

#include <cstdint>
#include <string>

namespace gmt::analysis {

// "512 B", "1.50 KiB", "7.00 MiB": binary units, because CUDA engineers compare against cudaMemGetInfo and
// nvidia-smi, which count in powers of two.
std::string format_bytes(uint64_t bytes);

// "7.00 MiB (7340032 B)"; just "512 B" when the short form is already exact.
std::string format_bytes_exact(uint64_t bytes);

// "1 alloc", "3 allocs": the count and the word that goes with it.
std::string count_of(uint64_t count, const char* singular, const char* plural_form);

// "device 0"; "host memory" for device -1 (pinned and managed host allocations).
std::string device_name(int64_t device);

// "850 ns", "12.3 us", "4.56 ms", "1.234 s", "2 min 03.5 s". Negative values keep their sign.
std::string format_duration(int64_t ns);

// "0x7f12ab34": how pcs appear in the JSON report and next to unknown frames.
std::string format_pc(uint64_t pc);

// The last path component, for the "[module]" tag of a frame: the full path lives in the JSON report.
std::string path_basename(const std::string& path);

// "cudaErrorMemoryAllocation" for the cudaError_t codes an allocation can return; "error 123" otherwise.
// A table of our own, because the analyzer never links the CUDA runtime.
std::string cuda_error_name(int64_t code);

}  // namespace gmt::analysis
