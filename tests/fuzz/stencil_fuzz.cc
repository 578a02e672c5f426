// Fuzzes the stencil parsers: stencil JSON, and --coeffs applied to a preset and to the parsed
// stencil. The input is split at the first NUL: JSON text before, coefficient text after.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "deepgrid/stencil.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view json = all.substr(0, nul);
  const std::string_view coeffs = nul == std::string_view::npos ? all : all.substr(nul + 1);
  (void)deepgrid::Stencil::preset("7pt")->with_coefficients(coeffs);
  auto st = deepgrid::Stencil::from_json(json);
  if (!st.ok()) return 0;
  if (st->size() < 1 || st->radius() > deepgrid::kMaxStencilRadius) std::abort();
  (void)st->with_coefficients(coeffs);
  auto again = deepgrid::Stencil::from_json(st->to_json(), st->name());
  if (!again.ok() || again->points() != st->points()) std::abort();
  return 0;
}
