// One frame of `gpumemtrace top` as text: a section per process (its live bytes per device with a sparkline, the call
// sites holding the most, those that grew the most, the recent failed allocations). Plain lines, no terminal control:
// the command clears the screen between frames when it writes to a terminal.
#pragma once

#include <string>
#include <vector>

#include "analysis/live/top_view.h"

namespace gmt::analysis {

enum class TopState { Recording, Ended };

// `state` is what the command saw of the process (its control socket present or gone).
std::string render_top_section(const TopView& view, TopState state, size_t width);

// "▁▂▄█": one character per value, scaled from 0 to the largest value.
std::string sparkline(const std::vector<uint64_t>& values);

}  // namespace gmt::analysis
