// Exit codes of the gpumemtrace CLI. `run` passes the app's own exit code through instead, except for the
// codes a shell would use when the app cannot be started (126, 127).
#pragma once

namespace gmt::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFindings = 1;      // reserved: a report with findings when asked to fail on them
inline constexpr int kExitBadInput = 2;      // bad options, missing/unreadable/foreign/newer trace files
inline constexpr int kExitInternal = 3;      // a bug or an environment problem in gpumemtrace itself
inline constexpr int kExitCannotExecute = 126;
inline constexpr int kExitAppNotFound = 127;

}  // namespace gmt::cli
