// What makes a user's kernel library safe to load for a grid (docs/security.md): the file's
// SHA-256, which a grid records when it is created and checks before every load; the
// directories a site allows kernel libraries in (DEEPGRID_KERNEL_DIRS); and the check that the
// library mapped is the file that was hashed.
#pragma once

#include <sys/types.h>

#include <string>

#include "core/file_util.h"
#include "deepgrid/status.h"

namespace deepgrid::internal {

// The environment variable a site sets to a ':'-separated list of directories: kernel
// libraries outside them (after resolving symbolic links) are refused.
inline constexpr const char* kKernelDirsVariable = "DEEPGRID_KERNEL_DIRS";

// A kernel library's file, open and hashed, not loaded. It stays open until the library is
// loaded, so that its inode cannot be freed and reused by another file meanwhile.
struct KernelFile {
  OwnedFd descriptor;
  std::string sha256;
  dev_t dev = 0;
  ino_t ino = 0;
};

// Opens and hashes the library at `path` (absolute): refused when it is outside the directories
// kKernelDirsVariable allows, or when `expected_sha256` is given and differs (an error naming
// both hashes and the fix).
Result<KernelFile> open_kernel_file(const std::string& path, const std::string& expected_sha256);

// Ok when the object `handle` (from dlopen) is mapped from `file`'s inode; an error when the
// path led dlopen elsewhere (the file was swapped after it was hashed, or this process had
// loaded an older build from the same path).
Status check_mapped(void* handle, const KernelFile& file, const std::string& path);

}  // namespace deepgrid::internal
