// Fuzzes the manifest reader: any text either parses into a self-consistent manifest, whose
// JSON parses back to the same manifest, or is refused with a Status. And a manifest that
// parses never leads deepgrid outside the grid (docs/security.md): every data file it names,
// under either name, is a plain file name in the grid directory or in one of its recorded
// store directories, with no "." or ".." anywhere in its path.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "deepgrid/store.h"
#include "store/grid_paths.h"

namespace {

constexpr const char* kGridDir = "/grid";

// Where `name` leads from the grid directory is inside it or in a recorded store.
bool confined(const deepgrid::Manifest& m, const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(kGridDir) / name;
  if (path.lexically_normal() != path || !path.has_filename()) return false;
  const std::string dir = path.parent_path().string();
  if (dir == kGridDir) return true;
  for (const std::string& store : m.stores) {
    if (dir == store) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = deepgrid::Manifest::from_json(text);
  if (!m.ok()) return 0;
  for (int64_t z = 0; z < m->shape.nz; z += 1 + m->shape.nz / 7) (void)m->locate(z);
  for (const deepgrid::DataFile& f : m->layout.files) {
    if (!confined(*m, f.path) || !confined(*m, deepgrid::internal::replacement_name(f.path))) {
      std::abort();
    }
  }
  auto again = deepgrid::Manifest::from_json(m->to_json());
  if (!again.ok() || again->to_json() != m->to_json()) std::abort();
  return 0;
}
