// `gpumemtrace whatif`'s output (analysis/replay/whatif.h): one row per setting, text or JSON.
#pragma once

#include <string>

#include "analysis/replay/whatif.h"

namespace gmt::analysis {

std::string render_whatif_text(const replay::WhatIfReport& report);
std::string render_whatif_json(const replay::WhatIfReport& report);

// One line for `report`'s OOM finding: the best setting found and its figures; "" when none does better, when the
// self-check was not exact, or when the trace's torch is not a release the policy was checked for (forced).
std::string describe_best_setting(const replay::WhatIfReport& report);
// The line said instead of a best setting for a torch outside replay::kCheckedTorchReleases.
std::string unchecked_torch_note(const replay::WhatIfReport& report);

}  // namespace gmt::analysis
