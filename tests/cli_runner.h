// What the command-line tests share: running the deepgrid binary (or a shell) with its output
// captured, reading and comparing files, checking its output, and a fixture with a temporary
// directory to create grids in.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "temp_dir.h"

extern char** environ;

namespace deepgrid::testing {

// ---------------------------------------------------------------------------------------------
// Running programs

struct RunResult {
  int exit_code = -1;
  std::string out, err;
  std::string command;  // for failure messages
};

inline std::string join_args(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs argv[0] (looked up in PATH) with stdin from /dev/null and stdout and stderr captured
// through pipes, so neither is a terminal.
inline RunResult run_process(const std::vector<std::string>& argv) {
  RunResult r;
  r.command = join_args(argv);
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.err = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);

  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);

  // Drain both pipes together so that a child filling one of them cannot block.
  std::array<pollfd, 2> fds = {{{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}}};
  std::array<std::string*, 2> sinks = {&r.out, &r.err};
  int open_pipes = 2;
  while (rc == 0 && open_pipes > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_pipes;
      }
    }
  }
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  if (rc != 0) {
    r.err = "posix_spawn " + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline RunResult run_cli(std::vector<std::string> args) {
  args.insert(args.begin(), DEEPGRID_CLI);
  return run_process(args);
}

inline RunResult run_shell(const std::string& script) {
  return run_process({"/bin/sh", "-c", script});
}

inline std::ostream& operator<<(std::ostream& os, const RunResult& r) {
  return os << "$ " << r.command << "\nexit code " << r.exit_code << "\n--- stdout ---\n"
            << r.out << "\n--- stderr ---\n"
            << r.err;
}

inline ::testing::AssertionResult Succeeded(const RunResult& r) {
  if (r.exit_code == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r;
}

// ---------------------------------------------------------------------------------------------
// Files

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

inline void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Everything under `root`: relative path -> file contents ("<dir>" for directories).
using Snapshot = std::map<std::string, std::string>;

inline Snapshot snapshot(const fs::path& root) {
  Snapshot s;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).string();
    s[rel] = e.is_directory() ? "<dir>" : read_file(e.path());
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Output checks

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// stdout must be exactly one line holding one JSON object.
inline nlohmann::json parse_one_json_object(const RunResult& r) {
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << "stdout is not one JSON object\n" << r;
  return j.is_object() ? j : nlohmann::json::object();
}

// ---------------------------------------------------------------------------------------------
// Grids to work on

class CliTest : public ::testing::Test {
 protected:
  // Creates grid `name` in the temporary directory; returns its path.
  std::string create(const std::string& name, const std::string& shape,
                     std::vector<std::string> extra = {}) {
    const std::string dir = tmp_ / name;
    std::vector<std::string> args = {"create", dir, "--shape", shape};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_TRUE(Succeeded(run_cli(args)));
    return dir;
  }

  TempDir tmp_;
};

// A grid of odd extents, small enough for every command to be quick.
inline const char* const kShape = "37x23x19";

inline std::vector<std::string> run_args(std::string dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"run", std::move(dir), "--stencil", "7pt", "--steps", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace deepgrid::testing
