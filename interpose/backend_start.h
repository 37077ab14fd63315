// Deciding the backend (recorder/backend.h) the first time any hook, or the driver's injection entry point,
// runs: the driver entry-point hooks where they bind, else CUPTI (interpose/backend_choice.h has the rule); the
// runtime hooks only under the simulated runtime (or when asked). Cheap after the first call: one atomic load.
#pragma once

namespace gmt::interpose {

void ensure_backend_started();

}  // namespace gmt::interpose
