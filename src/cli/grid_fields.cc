#include "cli/grid_fields.h"

#include "deepgrid/scheme.h"

namespace deepgrid::cli {

std::string fields_text(const Manifest& m) {
  if (m.fields.empty()) return "";
  std::string s = ", fields ";
  for (size_t i = 0; i < m.fields.size(); ++i) s += (i ? ", " : "") + m.fields[i];
  if (!m.scheme.empty()) {
    if (auto sc = Scheme::from_record(m.scheme); sc.ok()) s += " (scheme " + sc->name() + ")";
  }
  return s;
}

Result<int> field_component(const Manifest& m, const std::string& field) {
  if (field.empty()) return 0;
  const int c = m.component_index(field);
  if (c < 0) {
    std::string names = m.fields.empty() ? "u (a grid of one field)" : "";
    for (size_t i = 0; i < m.fields.size(); ++i) names += (i ? ", " : "") + m.fields[i];
    return invalid_argument("the grid has no field '" + field + "'; its fields are " + names);
  }
  return c;
}

}  // namespace deepgrid::cli
