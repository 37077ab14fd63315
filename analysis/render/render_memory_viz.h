// `report --format memory-viz`: PyTorch's memory snapshot format (analysis/model/snapshot.h says what it holds),
// pickled without Python. Binary: write it to a file (-o snap.pickle) and drop that on pytorch.org/memory_viz, or
// hand it to torch.cuda._memory_viz.
#pragma once

#include <string>

#include "analysis/model/snapshot.h"

namespace gmt::analysis {

std::string render_memory_viz(const Snapshot& snapshot);

}  // namespace gmt::analysis
