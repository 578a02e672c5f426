// The progress bar long runs show on a terminal.
#pragma once

#include <chrono>
#include <cstdint>

#include "engines/incore_engine.h"

namespace deepgrid::cli {

// A ProgressFn that draws "[#####     ]  50%  step 5/10  ETA 3s" on stderr, at most ten times
// a second, when stderr is a terminal; otherwise one that does nothing.
ProgressFn terminal_progress(const char* label);

// Set by SIGINT/SIGTERM: the bar's callback then asks the engine to stop after this step.
bool interrupted();
void install_interrupt_handler();
// The exit code of a run that an interrupt stopped early (the grid stays resumable).
inline constexpr int kExitStopped = 130;

}  // namespace deepgrid::cli
