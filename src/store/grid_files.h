// The names and sizes of a grid's files, shared by the manifest's checks (manifest.cc), the
// open grid (grid.cc) and the creation of a grid (create_grid.cc, and a distributed grid's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "deepgrid/store.h"

namespace deepgrid::internal {

inline constexpr const char* kManifestName = "manifest.json";
// A replacement made ready beside the grid's files and not committed yet (Grid::prepared).
inline constexpr const char* kPreparedName = "prepared.json";

// Exact size of data file f: the end of the last slot it holds.
int64_t expected_file_bytes(const Shape& s, const Layout& l, size_t f);
// Exact size of coefficient file f: the end of the last plane's coefficients it holds.
int64_t expected_coef_file_bytes(const Shape& s, const Layout& l, size_t f);

// Whether `dir` already exists (empty): a new grid goes into an empty or new directory whose
// parent exists, and where this process may write; anything else is refused with the fix.
Result<bool> check_new_grid_dir(const std::string& dir);

}  // namespace deepgrid::internal
