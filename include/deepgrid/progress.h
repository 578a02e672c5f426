// How a long computation reports its progress and is asked to stop.
#pragma once

#include <cstdint>
#include <functional>

namespace deepgrid {

// Called after each completed pass with (steps done, steps total); returns false to stop.
using ProgressFn = std::function<bool(int64_t, int64_t)>;

}  // namespace deepgrid
