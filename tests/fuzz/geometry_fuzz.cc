// Fuzzes the size and shape parsers of the command line (--mem, --shape, --tile).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "deepgrid/geometry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)deepgrid::parse_size(text);
  auto shape = deepgrid::parse_shape(text);
  if (shape.ok()) {
    // An accepted shape is valid and survives its own text form.
    if (!deepgrid::validate_shape(*shape).ok()) std::abort();
    auto again = deepgrid::parse_shape(shape->to_string());
    if (!again.ok() || !(*again == *shape)) std::abort();
  }
  return 0;
}
