#include "core/cpu_caches.h"

#include <charconv>
#include <fstream>
#include <string>

namespace deepgrid::internal {
namespace {

// Sizes as sysfs writes them: "32768K", "1M", or bytes.
int64_t parse_cache_size(const std::string& text) {
  int64_t n = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (error != std::errc() || n < 0) return 0;
  if (end != text.data() + text.size() && *end == 'K') return n << 10;
  if (end != text.data() + text.size() && *end == 'M') return n << 20;
  return n;
}

int64_t read_last_level_cache_bytes() {
  int best_level = 0;
  int64_t bytes = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level"), size_file(dir + "/size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size)) continue;
    if (level > best_level) {
      best_level = level;
      bytes = parse_cache_size(size);
    }
  }
  return bytes;
}

}  // namespace

int64_t last_level_cache_bytes() {
  static const int64_t bytes = read_last_level_cache_bytes();
  return bytes;
}

}  // namespace deepgrid::internal
