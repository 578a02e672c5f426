// A second process holding a grid: forks a child that opens the grid and keeps it open until
// it is killed, so tests can see what another process's lock does.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "deepgrid/store.h"

namespace deepgrid::testing {

class GridHolder {
 public:
  // Returns once the child holds the grid (or failed to open it: held() is then false).
  GridHolder(const std::string& dir, Grid::Mode mode) {
    int ready[2];
    if (::pipe(ready) != 0) {
      ADD_FAILURE() << "pipe failed";
      return;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      auto g = Grid::open(dir, mode);
      const char ok = g.ok() ? 1 : 0;
      (void)!::write(ready[1], &ok, 1);
      while (true) ::pause();
    }
    ::close(ready[1]);
    char ok = 0;
    held_ = ::read(ready[0], &ok, 1) == 1 && ok == 1;
    ::close(ready[0]);
  }
  ~GridHolder() { kill(); }
  GridHolder(const GridHolder&) = delete;
  GridHolder& operator=(const GridHolder&) = delete;

  bool held() const { return held_; }
  pid_t pid() const { return pid_; }
  // SIGKILL, as a crash would end it, and reaps it.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  bool held_ = false;
};

}  // namespace deepgrid::testing
