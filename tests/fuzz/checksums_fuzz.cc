// Fuzzes the checksum table reader: any text parses into a complete table that round-trips,
// or is refused with a Status.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "deepgrid/integrity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int64_t planes = data[0] % 8;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string_view algorithm = deepgrid::kChecksumAlgorithm;
  auto t = deepgrid::PlaneChecksums::from_json(text, planes, algorithm);
  if (!t.ok()) return 0;
  if (!t->complete() || t->planes() != planes) std::abort();
  auto again = deepgrid::PlaneChecksums::from_json(t->to_json(algorithm), planes, algorithm);
  if (!again.ok() || again->to_json(algorithm) != t->to_json(algorithm)) std::abort();
  return 0;
}
