#include "unwind/module_map.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "unwind/module_ranges.h"

namespace gmt::unwind {
namespace {

std::string hex(const unsigned char* bytes, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[bytes[i] >> 4]);
    out.push_back(digits[bytes[i] & 15]);
  }
  return out;
}

// The GNU build-id note, read from the mapped PT_NOTE segments (no file access needed).
std::string read_build_id(const dl_phdr_info* info) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const unsigned char* name = p + sizeof(ElfW(Nhdr));
      const unsigned char* desc = name + ((note->n_namesz + 3) & ~3u);
      if (desc + note->n_descsz > end) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::equal(name, name + 4, "GNU")) {
        return hex(desc, note->n_descsz);
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return {};
}

std::string main_executable_path() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

std::vector<Module> ModuleMap::scan_new_modules() {
  std::lock_guard lock(mutex_);
  std::vector<Module> fresh = std::move(kept_);
  kept_.clear();
  for (auto& m : scan_locked()) fresh.push_back(std::move(m));
  return fresh;
}

void ModuleMap::keep_before_unload() {
  std::lock_guard lock(mutex_);
  for (auto& m : scan_locked()) kept_.push_back(std::move(m));
}

std::vector<Module> ModuleMap::scan_locked() {
  std::vector<Module> all;
  for_each_module([&all](const LoadedModule& module) {
    const dl_phdr_info* info = module.info;
    Module m;
    m.path = info->dlpi_name ? info->dlpi_name : "";
    m.base = info->dlpi_addr;
    m.size = module.range.empty() ? 0 : module.range.end - info->dlpi_addr;  // to the end of the highest PT_LOAD
    m.build_id = read_build_id(info);
    all.push_back(std::move(m));
    return false;
  });

  std::vector<Module> fresh;
  for (auto& m : all) {
    if (m.path.empty()) {
      // The main program reports an empty name; the vDSO has no file. Only the first entry is the program.
      if (&m != &all.front()) continue;
      m.path = main_executable_path();
      if (m.path.empty()) continue;
    }
    if (m.path.rfind("linux-vdso", 0) == 0 || m.path.rfind("linux-gate", 0) == 0) continue;
    if (!seen_.emplace(m.path, m.base).second) continue;
    fresh.push_back(std::move(m));
  }
  return fresh;
}

}  // namespace gmt::unwind
