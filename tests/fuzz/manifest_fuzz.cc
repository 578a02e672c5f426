// Fuzzes the manifest reader: any text either parses into a self-consistent manifest, whose
// JSON parses back to the same manifest, or is refused with a Status.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "deepgrid/store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = deepgrid::Manifest::from_json(text);
  if (!m.ok()) return 0;
  for (int64_t z = 0; z < m->shape.nz; z += 1 + m->shape.nz / 7) (void)m->locate(z);
  auto again = deepgrid::Manifest::from_json(m->to_json());
  if (!again.ok() || again->to_json() != m->to_json()) std::abort();
  return 0;
}
