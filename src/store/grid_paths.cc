#include "store/grid_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/file_util.h"

namespace deepgrid::internal {
namespace {

constexpr std::string_view kDataExt = ".dgd", kReplacementExt = ".b.dgd";

bool is_id_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
         c == '_';
}

}  // namespace

Status check_grid_id(const std::string& id) {
  if (id.empty() || id.size() > 64 || !std::all_of(id.begin(), id.end(), is_id_char)) {
    return corrupt("manifest has an invalid id '" + id.substr(0, 80) +
                   "' (deepgrid's ids are hex digits); the manifest is damaged or crafted");
  }
  return Status::Ok();
}

std::string normal_store_path(const std::string& path) {
  std::string p = std::filesystem::path(absolute_path(path)).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

Status check_store_path(const std::string& path) {
  if (path.empty() || path[0] != '/' || normal_store_path(path) != path) {
    return corrupt("manifest names store directory '" + path.substr(0, 200) +
                   "', which is not an absolute, normal path; the manifest is damaged or crafted "
                   "(move a grid's data with 'deepgrid relocate', docs/security.md)");
  }
  return Status::Ok();
}

Status check_store_dirs(const std::vector<std::string>& stores) {
  for (const auto& s : stores) {
    if (!is_directory(s)) {
      return invalid_argument("store directory " + s + " does not exist; create it first");
    }
    if (::access(s.c_str(), W_OK) != 0) {
      return invalid_argument("store directory " + s + " is not writable; fix its permissions");
    }
  }
  return Status::Ok();
}

std::string data_file_path(const std::string& id, const std::vector<std::string>& stores,
                           size_t f) {
  const std::string n = std::to_string(f);
  return stores.empty() ? "data." + n + ".dgd"
                        : join_path(stores[f], "deepgrid-" + id + "." + n + ".dgd");
}

std::string coef_file_path(const std::string& id, const std::vector<std::string>& stores,
                           size_t f) {
  const std::string n = std::to_string(f);
  return stores.empty() ? "coef." + n + ".dgd"
                        : join_path(stores[f], "deepgrid-" + id + "." + n + ".coef.dgd");
}

bool is_replacement_name(const std::string& path) { return path.ends_with(kReplacementExt); }

std::string replacement_name(const std::string& path) {
  if (is_replacement_name(path)) {
    return path.substr(0, path.size() - kReplacementExt.size()) + std::string(kDataExt);
  }
  return path.substr(0, path.size() - kDataExt.size()) + std::string(kReplacementExt);
}

uint64_t replacement_bytes(const std::string& path) {
  struct stat file {};
  struct stat copy {};
  if (::stat(path.c_str(), &file) != 0 || ::lstat(replacement_name(path).c_str(), &copy) != 0) {
    return 0;
  }
  if (!S_ISREG(copy.st_mode) || copy.st_dev != file.st_dev) return 0;
  return static_cast<uint64_t>(copy.st_blocks) * 512;  // (st_blocks: 512-byte units)
}

Result<std::map<std::string, uint64_t>> room_for_copies(const std::vector<std::string>& paths) {
  std::map<std::string, uint64_t> room;
  for (const std::string& path : paths) room[parent_path(path)] += replacement_bytes(path);
  for (auto& [dir, bytes] : room) {
    DG_ASSIGN_OR_RETURN(const uint64_t free, free_bytes(dir));
    bytes += free;
  }
  return room;
}

Status check_data_files(const std::string& id, const std::vector<std::string>& stores,
                        const std::vector<DataFile>& files) {
  if (!stores.empty() && stores.size() != files.size()) {
    return corrupt("manifest records " + std::to_string(stores.size()) + " store directories for " +
                   std::to_string(files.size()) + " data files; the manifest is damaged");
  }
  for (const std::string& s : stores) DG_RETURN_IF_ERROR(check_store_path(s));
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string expected = data_file_path(id, stores, f);
    const std::string& path = files[f].path;
    if (path != expected && path != replacement_name(expected)) {
      return corrupt("manifest names data file '" + path.substr(0, 200) + "', not " + expected +
                     " as deepgrid names it; refusing a grid that points outside itself "
                     "(docs/security.md)");
    }
  }
  return Status::Ok();
}

Status check_coef_files(const std::string& id, const std::vector<std::string>& stores,
                        const std::vector<DataFile>& files) {
  for (size_t f = 0; f < files.size(); ++f) {
    if (!stores.empty() && f >= stores.size()) {
      return corrupt(
          "manifest lists more coefficient files than store directories; the "
          "manifest is damaged");
    }
    const std::string expected = coef_file_path(id, stores, f);
    if (files[f].path != expected) {
      return corrupt("manifest names coefficient file '" + files[f].path.substr(0, 200) +
                     "', not " + expected +
                     " as deepgrid names it; refusing a grid that points outside itself "
                     "(docs/security.md)");
    }
  }
  return Status::Ok();
}

std::vector<std::string> stores_of_files(const std::vector<DataFile>& files) {
  std::vector<std::string> stores;
  for (const DataFile& f : files) {
    if (f.path.empty() || f.path[0] != '/') return {};
    stores.push_back(parent_path(f.path));
  }
  return stores;
}

std::string part_name(const std::string& id, int rank) {
  return "deepgrid-" + id + ".part." + std::to_string(rank);
}

}  // namespace deepgrid::internal
