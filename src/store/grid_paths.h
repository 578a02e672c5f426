// The names of every file a grid's manifest leads deepgrid to open, and the rules that confine
// them (docs/security.md): a grid directory is data, not authority. A manifest names data files
// only as deepgrid names them itself, in the grid directory or in the store directories the
// grid was created with, and a distributed grid's parts only as deepgrid names them beside it
// or in their first store; anything else is refused before a file is opened.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deepgrid/status.h"
#include "deepgrid/store.h"

namespace deepgrid::internal {

// A grid's id as create makes it (16 hex digits): 1 to 64 letters, digits, '-' or '_', since
// it is part of the names of the grid's files in its stores.
Status check_grid_id(const std::string& id);

// A store directory as a manifest records it: absolute and lexically normal (no ".", "..",
// empty components or trailing '/'). `path` made so, for create and relocate.
std::string normal_store_path(const std::string& path);
Status check_store_path(const std::string& path);
// Each store directory a user gives exists and is writable (kInvalidArgument with the fix).
Status check_store_dirs(const std::vector<std::string>& stores);

// Where data file f of grid `id` goes: data.<f>.dgd in the grid directory (no stores), or
// <store f>/deepgrid-<id>.<f>.dgd.
std::string data_file_path(const std::string& id, const std::vector<std::string>& stores, size_t f);
// Where coefficient file f of grid `id` goes: coef.<f>.dgd in the grid directory (no stores),
// or <store f>/deepgrid-<id>.<f>.coef.dgd.
std::string coef_file_path(const std::string& id, const std::vector<std::string>& stores, size_t f);
// The other name of a data file (x.dgd <-> x.b.dgd): writers of a whole new state alternate.
std::string replacement_name(const std::string& path);
bool is_replacement_name(const std::string& path);  // x.b.dgd
// The disk space held by the replacement of data file `path` (its other name): a copy a commit
// kept for the next replacement (Grid::OldFiles::kKeep) or a crash left behind. The next
// replacement written takes it over or removes it, so it counts as free for that replacement.
// 0 when there is none, or when what has the name is not a regular file on `path`'s filesystem.
uint64_t replacement_bytes(const std::string& path);
// The room for a second copy in each directory of the data files `paths`: its free bytes and
// what the files' copies there hold (replacement_bytes), by directory.
Result<std::map<std::string, uint64_t>> room_for_copies(const std::vector<std::string>& paths);

// Ok when every data file is named as data_file_path names file f (or its replacement), in
// the stores recorded; else kCorrupt naming the first that is not. `id` has passed
// check_grid_id (read_grid_header checks it first).
Status check_data_files(const std::string& id, const std::vector<std::string>& stores,
                        const std::vector<DataFile>& files);
// The same for coefficient files (coef_file_path; they have no replacement name).
Status check_coef_files(const std::string& id, const std::vector<std::string>& stores,
                        const std::vector<DataFile>& files);
// The stores of a manifest written before they were recorded: the directories of its data
// files when they are absolute, else none (check_data_files then checks them).
std::vector<std::string> stores_of_files(const std::vector<DataFile>& files);

// The name of rank r's part of distributed grid `id` (a directory beside the grid's manifest,
// or in the part's first store).
std::string part_name(const std::string& id, int rank);

}  // namespace deepgrid::internal
