// How trace files are named: a contract between the CLI (which checks and reports the names) and the preload
// library (which creates the files), like the schema itself. Header-only: the library must not pull in more.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

namespace gmt::schema {

inline std::string current_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// What %r and %d expand to when no launcher variable says (docs/trace-format.md): a word, not "0", so a
// process outside any launcher (the launcher itself, when gpumemtrace wraps it) never takes rank 0's name.
inline constexpr const char* kNoRank = "norank";
inline constexpr const char* kNoDevice = "nodev";

// Where a process sits in a multi-process job, from the variables the common launchers set (torchrun,
// Open MPI's mpirun, Slurm's srun, MPICH/Intel MPI's PMI), first one set wins. Empty strings: not set.
struct LaunchIdentity {
  std::string rank;         // RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK
  std::string rank_source;  // the name of the variable rank came from
  std::string local_rank;   // LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID
  std::string local_rank_source;
  std::string world_size;      // WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, PMI_SIZE
  std::string visible_device;  // the first entry of CUDA_VISIBLE_DEVICES
};

// Keeps a value usable inside a file name: letters, digits, '.', '-' and '_'; anything else becomes '_'.
inline std::string file_name_safe(const std::string& value) {
  std::string out = value;
  for (char& c : out) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    if (!ok) c = '_';
  }
  return out;
}

inline LaunchIdentity launch_identity_from_environment() {
  LaunchIdentity id;
  auto first_set = [](std::initializer_list<const char*> names, std::string& value, std::string& source) {
    for (const char* name : names) {
      const char* v = getenv(name);
      if (v && *v) {
        value = v;
        source = name;
        return;
      }
    }
  };
  std::string unused;
  first_set({"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"}, id.rank, id.rank_source);
  first_set({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"}, id.local_rank,
            id.local_rank_source);
  first_set({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"}, id.world_size, unused);
  if (const char* v = getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    std::string list = v;
    id.visible_device = list.substr(0, list.find(','));
  }
  return id;
}

// The %d value: the local rank (launchers give each local process its own GPU by it), else the first visible
// device, else kNoDevice.
inline std::string local_device_label(const LaunchIdentity& id) {
  if (!id.local_rank.empty()) return file_name_safe(id.local_rank);
  if (!id.visible_device.empty()) return file_name_safe(id.visible_device);
  return kNoDevice;
}

// The sequences a trace path pattern may hold; the CLI refuses any other (is_valid_trace_pattern).
inline constexpr const char* kPatternSequences = "%p (pid), %r (rank), %d (local GPU), %h (host), %%";

// Expands %p (pid), %h (host name), %r (rank), %d (local GPU) and %% in a trace path pattern. Other %
// sequences stay as they are (the CLI refuses them before the run).
inline std::string expand_trace_pattern(const std::string& pattern, long pid, const std::string& host,
                                        const LaunchIdentity& id = {}) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out.push_back(pattern[i]);
      continue;
    }
    char c = pattern[++i];
    if (c == 'p') {
      out += std::to_string(pid);
    } else if (c == 'h') {
      out += host;
    } else if (c == 'r') {
      out += id.rank.empty() ? std::string(kNoRank) : file_name_safe(id.rank);
    } else if (c == 'd') {
      out += local_device_label(id);
    } else if (c == '%') {
      out.push_back('%');
    } else {
      out.push_back('%');
      out.push_back(c);
    }
  }
  return out;
}

// The first % sequence of a pattern that expand_trace_pattern does not know ("%x", or "%" at the end);
// empty when every sequence is known.
inline std::string unknown_pattern_sequence(const std::string& pattern) {
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%') continue;
    if (i + 1 == pattern.size()) return "%";
    char c = pattern[++i];
    if (c != 'p' && c != 'h' && c != 'r' && c != 'd' && c != '%') return std::string("%") + c;
  }
  return {};
}

// The pattern for a process other than the one the CLI started (a forked or exec'ed child): when the pattern
// has no %p, the pid goes before the extension (trace.db -> trace.%p.db), so two processes never share a file.
inline std::string child_trace_pattern(const std::string& pattern) {
  if (pattern.find("%p") != std::string::npos) return pattern;
  size_t slash = pattern.rfind('/');
  size_t dot = pattern.rfind('.');
  bool has_extension = dot != std::string::npos && (slash == std::string::npos || dot > slash + 1);
  std::string out = pattern;
  out.insert(has_extension ? dot : out.size(), ".%p");
  return out;
}

}  // namespace gmt::schema
