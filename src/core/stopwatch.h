// internal: elapsed wall time, for the figures reports give.
#pragma once

#include <chrono>

namespace deepgrid::internal {

// Seconds of steady-clock time since t0.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace deepgrid::internal
