#include "core/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <map>

#include "deepgrid/geometry.h"

namespace deepgrid::internal {

Status pread_full(int fd, void* buf, size_t n, int64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno_status(errno, "read", path, offset);
    if (got == 0) {
      return corrupt("read " + path + " at offset " + std::to_string(offset) +
                     ": unexpected end of file (the data file is truncated)");
    }
    p += got;
    n -= static_cast<size_t>(got);
    offset += got;
  }
  return Status::Ok();
}

Status pwrite_full(int fd, const void* buf, size_t n, int64_t offset, const std::string& path) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t put = ::pwrite(fd, p, n, offset);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return errno_status(errno, "write", path, offset);
    if (put == 0) return errno_status(ENOSPC, "write", path, offset);
    p += put;
    n -= static_cast<size_t>(put);
    offset += put;
  }
  return Status::Ok();
}

Status fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "open", path);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return errno_status(err, "fsync", path);
  return Status::Ok();
}

Status write_file_atomic(const std::string& dir, const std::string& name, const std::string& text) {
  return write_file_atomic(dir, name, {std::string_view(text)});
}

Status write_file_atomic(const std::string& dir, const std::string& name,
                         std::initializer_list<std::string_view> pieces) {
  return write_file_atomic(dir, name,
                           std::span<const std::string_view>(pieces.begin(), pieces.end()));
}

Status write_file_atomic(const std::string& dir, const std::string& name,
                         std::span<const std::string_view> pieces) {
  const std::string final_path = join_path(dir, name);
  const std::string tmp = final_path + ".tmp";
  ::unlink(tmp.c_str());  // (a leftover of a crash, or something planted there)
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status(errno, "create", tmp);
  Status st;
  int64_t at = 0;
  for (const std::string_view piece : pieces) {
    if (st.ok()) st = pwrite_full(fd, piece.data(), piece.size(), at, tmp);
    at += static_cast<int64_t>(piece.size());
  }
  if (st.ok() && ::fsync(fd) != 0) st = errno_status(errno, "fsync", tmp);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    st = errno_status(errno, "rename", tmp);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return fsync_path(dir);
}

Status link_refused(const std::string& path) {
  return corrupt(path +
                 " is a symbolic link, which deepgrid does not follow in a grid "
                 "(docs/security.md); put the file itself there");
}

namespace {

// Everything the open file `fd` holds; closes it.
Result<std::string> read_all_and_close(int fd, const std::string& path) {
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      Status st = errno_status(errno, "read", path);
      ::close(fd);
      return st;
    }
    if (got == 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return out;
}

// Opens one of deepgrid's own files (`flags` without O_NOFOLLOW), first with O_DIRECT when
// `direct` is given (then *direct says whether the filesystem took it): a symbolic link or
// anything but a regular file is refused with a one-line error naming it (O_NONBLOCK, which
// regular files ignore, keeps a FIFO in a file's place from blocking the open).
Result<int> open_own_file(const std::string& path, int flags, bool* direct = nullptr) {
  flags |= O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  int fd = -1;
  if (direct != nullptr) {
    fd = ::open(path.c_str(), flags | O_DIRECT, 0644);
    *direct = fd >= 0;
  }
  if (fd < 0 && (direct == nullptr || errno == EINVAL)) fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0 && errno == ELOOP) return link_refused(path);
  if (fd < 0) return errno_status(errno, "open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return corrupt(path + " is not a regular file; a grid holds only regular files");
  }
  return fd;
}

}  // namespace

Result<std::string> read_small_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "open", path);
  return read_all_and_close(fd, path);
}

Result<std::string> read_own_file(const std::string& path) {
  DG_ASSIGN_OR_RETURN(const int fd, open_own_file(path, O_RDONLY));
  return read_all_and_close(fd, path);
}

Result<int> open_data_file(const std::string& path, int flags, bool* direct) {
  return open_own_file(path, flags, direct);
}

Status check_free_space(const std::vector<SpaceNeed>& needs, const std::string& purpose,
                        const std::string& fix) {
  std::map<dev_t, uint64_t> per_filesystem;
  std::vector<dev_t> devices;
  for (const SpaceNeed& n : needs) {
    struct stat st {};
    if (::stat(n.dir.c_str(), &st) != 0) return errno_status(errno, "stat", n.dir);
    per_filesystem[st.st_dev] += n.bytes;
    devices.push_back(st.st_dev);
  }
  for (size_t i = 0; i < needs.size(); ++i) {
    DG_ASSIGN_OR_RETURN(uint64_t avail, free_bytes(needs[i].dir));
    const uint64_t need = per_filesystem[devices[i]] + (1 << 20);
    if (avail < need) {
      return Status(ErrorCode::kNoSpace, "not enough free space in " + needs[i].dir + ": " +
                                             purpose + " needs " + format_size(need) +
                                             " there but " + format_size(avail) + " is free; " +
                                             fix);
    }
  }
  return Status::Ok();
}

Result<uint64_t> free_bytes(const std::string& path) {
  struct statvfs vfs {};
  if (::statvfs(path.c_str(), &vfs) != 0) return errno_status(errno, "statvfs", path);
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

Result<bool> directory_is_empty(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return errno_status(errno, "open directory", path);
  bool empty = true;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  return empty;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (!name.empty() && name[0] == '/') return name;
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string parent_path(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  auto pos = p.rfind('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return p.substr(0, pos);
}

std::string absolute_path(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char buf[PATH_MAX];
  if (::getcwd(buf, sizeof buf) == nullptr) return path;
  return join_path(buf, path);
}

}  // namespace deepgrid::internal
