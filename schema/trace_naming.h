// How trace files are named: a contract between the CLI (which checks and reports the names) and the preload
// library (which creates the files), like the schema itself. Header-only: the library must not pull in more.
#pragma once

#include <unistd.h>

#include <string>

namespace gmt::schema {

inline std::string current_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// Expands %p (pid), %h (host name) and %% in a trace path pattern. Other % sequences stay as they are.
inline std::string expand_trace_pattern(const std::string& pattern, long pid, const std::string& host) {
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
    } else if (c == '%') {
      out.push_back('%');
    } else {
      out.push_back('%');
      out.push_back(c);
    }
  }
  return out;
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
