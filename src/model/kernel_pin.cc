#include "model/kernel_pin.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/sha256.h"

namespace deepgrid::internal {
namespace {

// `path` with symbolic links resolved, or empty.
std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

Status check_allowed(const std::string& path) {
  const char* dirs = std::getenv(kKernelDirsVariable);
  if (dirs == nullptr || *dirs == '\0') return Status::Ok();
  const std::string real = real_path(path);
  std::stringstream list(dirs);
  for (std::string dir; std::getline(list, dir, ':');) {
    const std::string allowed = real_path(dir);
    if (!allowed.empty() && real.starts_with(allowed == "/" ? allowed : allowed + "/")) {
      return Status::Ok();
    }
  }
  return invalid_argument("kernel library " + path + (real == path ? "" : " (" + real + ")") +
                          " is not in a directory " + kKernelDirsVariable + " allows (" + dirs +
                          "); install it into one of them, or ask whoever set " +
                          kKernelDirsVariable);
}

}  // namespace

Result<KernelFile> open_kernel_file(const std::string& path, const std::string& expected_sha256) {
  DG_RETURN_IF_ERROR(check_allowed(path));
  KernelFile file;
  const int fd = file.descriptor.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "open kernel library", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_status(errno, "stat", path);
  file.dev = st.st_dev;
  file.ino = st.st_ino;
  DG_ASSIGN_OR_RETURN(file.sha256, sha256_of_file(fd, path));
  if (!expected_sha256.empty() && file.sha256 != expected_sha256) {
    return invalid_argument("kernel library " + path + " has SHA-256 " + file.sha256 +
                            ", not the " + expected_sha256 +
                            " the grid recorded: it was rebuilt or replaced. Restore that "
                            "build, or pass --kernel " +
                            path + " to run this one (the grid then records its hash)");
  }
  return file;
}

Status check_mapped(void* handle, const KernelFile& file, const std::string& path) {
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_ld == nullptr) {
    return Status::Ok();  // (no dynamic section to find: nothing to compare)
  }
  const auto at = reinterpret_cast<uintptr_t>(map->l_ld);
  std::ifstream maps("/proc/self/maps");
  if (!maps) return Status::Ok();  // (no /proc: the hash alone guards the load)
  for (std::string line; std::getline(maps, line);) {
    unsigned long long lo = 0, hi = 0, offset = 0, inode = 0;
    unsigned maj = 0, min = 0;
    char perms[8];
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu", &lo, &hi, perms, &offset, &maj,
                    &min, &inode) != 7 ||
        at < lo || at >= hi) {
      continue;
    }
    if (inode == file.ino && maj == major(file.dev) && min == minor(file.dev)) return Status::Ok();
    return invalid_argument("kernel library " + path +
                            " changed while it was loaded, or this process loaded an older build "
                            "of it before; run again in a new process");
  }
  return Status::Ok();  // (its mapping not listed: nothing to compare)
}

}  // namespace deepgrid::internal
