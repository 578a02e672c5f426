// internal: what the CPU's caches hold, as the system describes them.
#pragma once

#include <cstdint>

namespace deepgrid::internal {

// Bytes of the largest CPU cache of this machine (sysfs: cpu0's cache of the highest level),
// read once; 0 where the system does not say.
int64_t last_level_cache_bytes();

}  // namespace deepgrid::internal
