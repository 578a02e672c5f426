// The names and sizes of a grid's files, shared by the manifest's checks (manifest.cc), the
// open grid (grid.cc), the creation of a grid (create_grid.cc, and a distributed grid's) and
// the writers that replace its files (relocate.cc, upgrade.cc).
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

// Whether the manifest in `dir` names `path` as its first data file, or cannot be read. A
// commit that failed after its rename (the directory's fsync) has made its files the grid's:
// a writer undoing what it made (relocate, upgrade) must then leave them.
bool manifest_names_data_file(const std::string& dir, const std::string& path);

// Whether `dir` already exists (empty): a new grid goes into an empty or new directory whose
// parent exists, and where this process may write; anything else is refused with the fix.
Result<bool> check_new_grid_dir(const std::string& dir);

}  // namespace deepgrid::internal
