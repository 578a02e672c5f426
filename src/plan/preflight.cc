#include "plan/preflight.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "store/grid_paths.h"

namespace deepgrid {
namespace {

constexpr uint64_t kCommitMargin = 1 << 20;

// Whether `path` opens with O_DIRECT (EINVAL: the filesystem refuses it).
bool supports_direct_io(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return errno != EINVAL;
  ::close(fd);
  return true;
}

bool is_stream(Method m) { return m == Method::kStream || m == Method::kNaive; }

}  // namespace

Result<PreflightFacts> measure_preflight(const Grid& grid) {
  PreflightFacts f;
  DG_ASSIGN_OR_RETURN(f.grid_dir_free_bytes, internal::free_bytes(grid.dir()));
  f.physical_memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                      static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (::access(grid.dir().c_str(), W_OK) != 0) f.unwritable.push_back(grid.dir());
  std::vector<std::string> paths;
  for (int file = 0; file < static_cast<int>(grid.manifest().layout.files.size()); ++file) {
    paths.push_back(grid.file_path(file));
  }
  DG_ASSIGN_OR_RETURN(const auto room, internal::room_for_copies(paths));
  for (const std::string& path : paths) {
    const std::string dir = internal::parent_path(path);
    f.data_dir_free.emplace_back(dir, room.at(dir));
    if (!supports_direct_io(path)) f.without_direct_io.push_back(dir);
    if (::access(path.c_str(), W_OK) != 0) f.unwritable.push_back(path);
  }
  return f;
}

uint64_t commit_space_needed(const Manifest& m) {
  // The table holds "<16 hex digits>", per plane.
  const uint64_t table = static_cast<uint64_t>(m.shape.nz) * 19 + 128;
  return 2 * (m.to_json().size() + table) + kCommitMargin;
}

// Sweeps in bands write a second copy of the data files beside them: every directory needs
// room for the copies of its files.
Status check_copy_space(const Manifest& m, const PreflightFacts& facts) {
  for (size_t f = 0; f < facts.data_dir_free.size(); ++f) {
    const auto& [dir, free] = facts.data_dir_free[f];
    uint64_t need = 0;
    for (size_t g = 0; g < facts.data_dir_free.size() && g < m.layout.files.size(); ++g) {
      if (facts.data_dir_free[g].first == dir)
        need += static_cast<uint64_t>(m.layout.files[g].bytes);
    }
    if (free < need) {
      return Status(ErrorCode::kNoSpace, dir + " has " + format_size(free) +
                                             " free but sweeping in bands of rows "
                                             "writes a second copy of the data files there, " +
                                             format_size(need) +
                                             "; free some space, or leave out --band-rows");
    }
  }
  return Status::Ok();
}

Status check_preflight(const Manifest& m, const RunPlan& plan, const PreflightFacts& facts) {
  if (!facts.unwritable.empty()) {
    return invalid_argument(facts.unwritable.front() +
                            " is not writable, and a run rewrites the grid; fix its permissions");
  }
  const uint64_t need = commit_space_needed(m);
  if (facts.grid_dir_free_bytes < need) {
    return Status(ErrorCode::kNoSpace, "the grid directory has " +
                                           format_size(facts.grid_dir_free_bytes) +
                                           " free but a run needs " + format_size(need) +
                                           " there to commit its result; free some space first");
  }
  if (is_stream(plan.method) && plan.stream.bands > 0)
    DG_RETURN_IF_ERROR(check_copy_space(m, facts));
  if (plan.memory_bytes > facts.physical_memory) {
    return invalid_argument(
        "the " + std::string(method_name(plan.method)) + " run needs " +
        format_size(plan.memory_bytes) + " of memory but this machine has " +
        format_size(facts.physical_memory) +
        (is_stream(plan.method) ? "; lower --mem" : "; use --method stream with a smaller --mem"));
  }
  if (is_stream(plan.method) && !facts.without_direct_io.empty()) {
    return invalid_argument("the filesystem of " + facts.without_direct_io.front() +
                            " does not support O_DIRECT, which the " +
                            std::string(method_name(plan.method)) +
                            " method needs to stay within --mem (tmpfs?); move the grid to a "
                            "disk filesystem (ext4, xfs) or use --method incore");
  }
  return Status::Ok();
}

}  // namespace deepgrid
