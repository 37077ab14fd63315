#include "analysis/read/trace_tables.h"

namespace gmt::analysis {
namespace {

struct OptionalTable {
  const char* name;
  int since_version;  // the schema version that added it (schema/trace_schema.h's history)
  const char* missing;
};

// Every optional table a report reads, in the order the report uses them.
constexpr OptionalTable kOptionalTables[] = {
    {"stacks", 1, "no allocation has a call stack"},
    {"stack_frames", 1, "no allocation has a call stack"},
    {"modules", 1, "frames name no module"},
    {"symbols", 1, "frames show addresses only, without functions, files or lines"},
    {"alloc_failures", 1, "failed allocations show no free device memory (out of memory or fragmentation is unknown)"},
    {"pool_usage", 3, "no stream-ordered pool figures"},
    {"strings", 4, "NVTX ranges and Python frames have no names"},
    {"ranges", 4, "no memory by NVTX range"},
    {"python_frames", 5, "call stacks show no Python frames"},
    {"allocator_stats", 6, "no framework allocator statistics"},
    {"devices", 6, "devices are named by number only"},
};

}  // namespace

std::string missing_table_note(const std::string& table) {
  for (const OptionalTable& known : kOptionalTables) {
    if (table == known.name) return "the trace has no " + table + " table: " + known.missing;
  }
  return "the trace has no " + table + " table";
}

std::vector<std::string> missing_table_notes(const TraceFile& trace) {
  std::vector<std::string> notes;
  for (const OptionalTable& table : kOptionalTables) {
    if (table.since_version <= trace.schema_version() && !trace.has_table(table.name)) {
      notes.push_back(missing_table_note(table.name));
    }
  }
  return notes;
}

}  // namespace gmt::analysis
