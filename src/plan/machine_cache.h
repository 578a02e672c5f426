// internal: single numbers in this machine's profile in machine.json (machine.h), for
// measurements kept beside the machine's own (device_rates.h).
#pragma once

#include <optional>
#include <string>

namespace deepgrid::internal {

// The number cached under `section`/`key` for this machine, if there is one.
std::optional<double> cached_machine_number(const std::string& section, const std::string& key);
// Caches it (a cache that cannot be read or written is ignored).
void cache_machine_number(const std::string& section, const std::string& key, double value);

}  // namespace deepgrid::internal
