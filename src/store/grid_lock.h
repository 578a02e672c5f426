// internal: the lock that keeps writers of a grid exclusive. flock(2) on DIR/deepgrid.lock:
// readers share it, a writer holds it alone. The kernel drops it when its holder exits or is
// killed, so a crash never leaves a grid locked.
#pragma once

#include <string>

#include "deepgrid/status.h"

namespace deepgrid::internal {

inline constexpr const char* kLockFileName = "deepgrid.lock";

class GridLock {
 public:
  enum class Kind { kShared, kExclusive };

  // Takes the lock on DIR's lock file without waiting, creating the file where it is missing.
  // A grid held by another process fails with kBusy, naming the holders' process ids. A
  // shared lock on a directory where the file cannot be created (read-only) is granted
  // unlocked: no writer can work there either.
  static Result<GridLock> acquire(const std::string& dir, Kind kind);

  GridLock() = default;
  GridLock(GridLock&& other) noexcept;
  GridLock& operator=(GridLock&& other) noexcept;
  GridLock(const GridLock&) = delete;
  GridLock& operator=(const GridLock&) = delete;
  ~GridLock();

 private:
  explicit GridLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace deepgrid::internal
