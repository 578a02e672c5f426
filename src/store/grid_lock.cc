#include "store/grid_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "core/file_util.h"

namespace deepgrid::internal {
namespace {

// "deepgrid run" for a process running `/path/deepgrid run g ...`; empty when unknown.
std::string command_of(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string program, verb;
  std::getline(in, program, '\0');
  std::getline(in, verb, '\0');
  if (program.empty()) return "";
  const size_t slash = program.rfind('/');
  if (slash != std::string::npos) program = program.substr(slash + 1);
  return verb.empty() || verb[0] == '-' ? program : program + " " + verb;
}

// The processes holding flock(2) locks on the file `st` describes, from /proc/locks:
// "1: FLOCK  ADVISORY  WRITE 4242 08:01:131 0 EOF" (device numbers in hex).
std::vector<long> lock_holders(const struct stat& st) {
  std::vector<long> pids;
  std::ifstream in("/proc/locks");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, type, advisory, access, device;
    long pid = 0;
    if (!(fields >> id >> type) || type != "FLOCK") continue;  // "->" marks waiters
    if (!(fields >> advisory >> access >> pid >> device)) continue;
    unsigned maj = 0, min = 0;
    unsigned long long ino = 0;
    if (std::sscanf(device.c_str(), "%x:%x:%llu", &maj, &min, &ino) != 3) continue;
    if (ino == st.st_ino && maj == major(st.st_dev) && min == minor(st.st_dev)) {
      pids.push_back(pid);
    }
  }
  return pids;
}

Status busy(const std::string& dir, int fd, GridLock::Kind kind) {
  struct stat st {};
  std::string holders;
  if (::fstat(fd, &st) == 0) {
    for (long pid : lock_holders(st)) {
      if (pid == ::getpid()) continue;  // a pid listed is ours only when we hold it elsewhere
      const std::string command = command_of(pid);
      holders += (holders.empty() ? "" : ", ") + std::string("pid ") + std::to_string(pid) +
                 (command.empty() ? "" : " (" + command + ")");
    }
  }
  if (holders.empty()) holders = "another process";
  return Status(ErrorCode::kBusy,
                "grid " + dir + " is in use by " + holders +
                    (kind == GridLock::Kind::kExclusive ? "" : ", which changes it") +
                    "; wait until it finishes (or stop it) and try again");
}

}  // namespace

Result<GridLock> GridLock::acquire(const std::string& dir, Kind kind) {
  const std::string path = join_path(dir, kLockFileName);
  // (a link in the lock's place is refused: it would create or lock a file outside the grid)
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && (errno == EACCES || errno == EROFS))
    fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ELOOP) return link_refused(path);
  if (fd < 0) {
    if (kind == Kind::kShared && (errno == EACCES || errno == EROFS)) return GridLock();
    return errno_status(errno, "open lock file", path);
  }
  const int op = (kind == Kind::kExclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
  int rc;
  while ((rc = ::flock(fd, op)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    const int err = errno;
    Status st = err == EWOULDBLOCK ? busy(dir, fd, kind) : errno_status(err, "lock", path);
    ::close(fd);
    return st;
  }
  return GridLock(fd);
}

GridLock::GridLock(GridLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

GridLock& GridLock::operator=(GridLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

GridLock::~GridLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace deepgrid::internal
