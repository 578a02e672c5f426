// internal: POSIX file helpers that turn errno into Status in one place.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepgrid/status.h"

namespace deepgrid::internal {

// An open file descriptor (-1: none), closed when this goes; movable, not copyable.
struct OwnedFd {
  int fd = -1;

  OwnedFd() = default;
  OwnedFd(OwnedFd&& other) noexcept : fd(std::exchange(other.fd, -1)) {}
  OwnedFd& operator=(OwnedFd&&) = delete;
  ~OwnedFd() {
    if (fd >= 0) ::close(fd);
  }
};

// The refusal of a symbolic link found where one of deepgrid's own files belongs.
Status link_refused(const std::string& path);

// Full-length pread/pwrite (retrying EINTR and short transfers). A read that meets end of
// file reports the file and offset as corrupt.
Status pread_full(int fd, void* buf, size_t n, int64_t offset, const std::string& path);
Status pwrite_full(int fd, const void* buf, size_t n, int64_t offset, const std::string& path);

// Writes `text` to DIR/NAME atomically: temporary file, fsync, rename, fsync DIR. The
// temporary file is made anew (a file or link left in its place is removed, never written
// through).
Status write_file_atomic(const std::string& dir, const std::string& name, const std::string& text);
// The same for content in pieces, written one after another (nothing copies them together).
Status write_file_atomic(const std::string& dir, const std::string& name,
                         std::initializer_list<std::string_view> pieces);
Status write_file_atomic(const std::string& dir, const std::string& name,
                         std::span<const std::string_view> pieces);
// A file the user named (a scheme, a probes file): whatever `path` leads to.
Result<std::string> read_small_file(const std::string& path);
// A file deepgrid wrote itself in a grid directory (manifest, checksum table, records): only
// a regular file, and not through a symbolic link, so that a crafted grid cannot make deepgrid
// read a file outside it (docs/security.md).
Result<std::string> read_own_file(const std::string& path);

// Opens a data file with O_DIRECT where the filesystem allows it (else without; *direct says
// which). A symbolic link is refused and so is anything but a regular file: data files are
// deepgrid's own, and a link in their place would lead its writes outside the grid.
Result<int> open_data_file(const std::string& path, int flags, bool* direct);

// Bytes available to unprivileged users on the filesystem holding `path`.
Result<uint64_t> free_bytes(const std::string& path);

// Bytes a method will write into a directory beside the grid.
struct SpaceNeed {
  std::string dir;
  uint64_t bytes = 0;
};
// Checks that each filesystem has room for the needs of all its directories together;
// kNoSpace naming the directory, what `purpose` needs there, what is free and the `fix`.
Status check_free_space(const std::vector<SpaceNeed>& needs, const std::string& purpose,
                        const std::string& fix = "free space or use --method stream");
bool is_directory(const std::string& path);
Result<bool> directory_is_empty(const std::string& path);
Status fsync_path(const std::string& path);
std::string join_path(const std::string& dir, const std::string& name);
std::string parent_path(const std::string& path);
std::string absolute_path(const std::string& path);

}  // namespace deepgrid::internal
