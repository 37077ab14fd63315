// Which tables a report needs and what it loses without each: the one wording for a trace that lacks a table
// ("the trace has no symbols table: frames show addresses only, ..."), whether the table is older than the trace's
// schema version or was lost with a damaged file. Only meta and events are required (TraceFile::open).
#pragma once

#include <string>
#include <vector>

#include "analysis/read/trace_file.h"

namespace gmt::analysis {

// "the trace has no <table> table: <what is missing from this report>"; for any table the report reads.
std::string missing_table_note(const std::string& table);

// The notes of the optional tables that the trace's schema version has but the trace lacks (a damaged or
// hand-made trace). Tables newer than the trace's version are left out here: their sections say so themselves.
std::vector<std::string> missing_table_notes(const TraceFile& trace);

}  // namespace gmt::analysis
