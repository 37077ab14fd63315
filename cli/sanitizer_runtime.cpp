#include "cli/sanitizer_runtime.h"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

namespace gmt::cli {
namespace {

// Where execvp finds the command: as given when it holds a '/', else the first executable in PATH.
std::string resolve_command(const std::string& command) {
  if (command.find('/') != std::string::npos) return command;
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    std::string candidate = dir + "/" + command;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return {};
}

template <typename T>
bool read_at(std::ifstream& in, uint64_t offset, T& out) {
  in.seekg(static_cast<std::streamoff>(offset));
  return static_cast<bool>(in.read(reinterpret_cast<char*>(&out), sizeof out));
}

// The DT_NEEDED names of a 64-bit little-endian ELF file, through its section headers (the dynamic section
// and the string table it links to). Anything malformed gives what was read so far.
std::vector<std::string> needed_libraries(const std::string& file) {
  std::vector<std::string> needed;
  std::ifstream in(file, std::ios::binary);
  Elf64_Ehdr header{};
  if (!in || !read_at(in, 0, header) || std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
      header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shnum > 4096) {
    return needed;
  }
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  for (size_t i = 0; i < sections.size(); ++i) {
    if (!read_at(in, header.e_shoff + i * sizeof(Elf64_Shdr), sections[i])) return needed;
  }
  for (const Elf64_Shdr& dynamic : sections) {
    if (dynamic.sh_type != SHT_DYNAMIC || dynamic.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strings = sections[dynamic.sh_link];
    for (uint64_t at = 0; at + sizeof(Elf64_Dyn) <= dynamic.sh_size && needed.size() < 256; at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry{};
      if (!read_at(in, dynamic.sh_offset + at, entry) || entry.d_tag == DT_NULL) break;
      if (entry.d_tag != DT_NEEDED || entry.d_un.d_val >= strings.sh_size) continue;
      in.seekg(static_cast<std::streamoff>(strings.sh_offset + entry.d_un.d_val));
      std::string name;
      std::getline(in, name, '\0');
      if (in) needed.push_back(name);
    }
  }
  return needed;
}

}  // namespace

std::string sanitizer_runtime_of(const std::string& command) {
  std::string file = resolve_command(command);
  if (file.empty()) return {};
  for (const std::string& name : needed_libraries(file)) {
    for (const char* runtime : {"libasan.so", "libtsan.so", "libclang_rt.asan", "libclang_rt.tsan"}) {
      if (name.rfind(runtime, 0) == 0) return name;
    }
  }
  return {};
}

}  // namespace gmt::cli
