// The command line's refusals of bad input, as a catalogue of cases (docs/bad_input.md): each
// spawns the real binary in a fresh temporary directory and checks that it exits 2 with one
// line on stderr naming the problem, prints nothing on stdout and changes nothing on disk.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "bad_input_cases.h"
#include "cli_runner.h"
#include "temp_dir.h"

namespace {

using namespace deepgrid::testing;  // cli_runner.h: running the CLI and checking what it did
using namespace deepgrid::testing::bad_input;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string expand(std::string arg, const fs::path& tmp) {
  const std::string key = "{tmp}";
  for (size_t pos; (pos = arg.find(key)) != std::string::npos;) arg.replace(pos, key.size(), tmp);
  return arg;
}

// The catalogue: every case, in the order of docs/bad_input.md.
std::vector<BadInputCase> bad_input_cases() {
  std::vector<BadInputCase> cases;
  for (const auto& table : {create_cases, kernel_cases, run_option_cases, scheme_and_probe_cases,
                            segy_cases, broken_grid_cases, damaged_value_cases, more_option_cases,
                            split_cases, missing_directory_cases, trust_cases}) {
    for (BadInputCase& c : table()) cases.push_back(std::move(c));
  }
  return cases;
}

class BadInputTest : public ::testing::TestWithParam<BadInputCase> {};

}  // namespace

namespace deepgrid::testing::bad_input {
void PrintTo(const BadInputCase& c, std::ostream* os) { *os << c.name; }
}  // namespace deepgrid::testing::bad_input

namespace {

// `text` with the temporary directory written as {tmp}, as the catalogue shows it.
std::string with_tmp_placeholder(std::string text, const fs::path& tmp) {
  const std::string t = tmp.string();
  for (size_t pos; (pos = text.find(t)) != std::string::npos;) text.replace(pos, t.size(), "{tmp}");
  return text;
}

// With DEEPGRID_BAD_INPUT_TABLE=FILE, each case appends its row of docs/bad_input.md there:
// how the table's messages are regenerated.
void append_catalogue_row(const char* table, const BadInputCase& c, const RunResult& r,
                          const fs::path& tmp) {
  std::string command = "deepgrid";
  for (const auto& a : c.args) command += " " + a;
  std::string message = with_tmp_placeholder(r.err, tmp);
  if (!message.empty() && message.back() == '\n') message.pop_back();
  std::ofstream(table, std::ios::app)
      << "| " << c.name << " | `" << command << "` | `" << message << "` |\n";
}

TEST_P(BadInputTest, ExitsTwoWithOneLineAndChangesNothing) {
  const BadInputCase& c = GetParam();
  SCOPED_TRACE(c.name);
  if (c.needs_permissions && ::geteuid() == 0) {
    GTEST_SKIP() << "running as root: permissions are not enforced";
  }
  TempDir tmp;
  if (c.setup) {
    ASSERT_NO_FATAL_FAILURE(c.setup(tmp.path()));
  }
  const Snapshot before = snapshot(tmp.path());
  std::vector<std::string> args;
  for (const auto& a : c.args) args.push_back(expand(a, tmp.path()));

  const RunResult r = run_cli(args);

  EXPECT_EQ(r.exit_code, 2) << r;
  EXPECT_EQ(r.out, "") << r;
  const bool one_line =
      r.err.size() > 1 && r.err.back() == '\n' && std::count(r.err.begin(), r.err.end(), '\n') == 1;
  EXPECT_TRUE(one_line) << "stderr is not exactly one non-empty line\n" << r;
  const std::string err = lower(r.err);
  EXPECT_TRUE(std::any_of(c.keywords.begin(), c.keywords.end(),
                          [&](const std::string& k) { return contains(err, lower(k)); }))
      << "stderr mentions none of: " << join_args(c.keywords) << "\n"
      << r;
  EXPECT_TRUE(snapshot(tmp.path()) == before) << "files under " << tmp.path() << " changed\n" << r;
  if (!c.must_not_exist.empty()) {
    EXPECT_FALSE(fs::exists(c.must_not_exist)) << c.must_not_exist << " was created";
  }
  if (const char* table = std::getenv("DEEPGRID_BAD_INPUT_TABLE")) {
    append_catalogue_row(table, c, r, tmp.path());
  }
}

TEST(BadInputCatalogue, DocsListEveryCase) {
  const std::string doc = read_file(fs::path(DEEPGRID_SOURCE_DIR) / "docs" / "bad_input.md");
  ASSERT_FALSE(doc.empty()) << "docs/bad_input.md is missing";
  for (const BadInputCase& c : bad_input_cases()) {
    EXPECT_TRUE(contains(doc, "| " + c.name + " |"))
        << c.name << " has no row in docs/bad_input.md";
  }
}

INSTANTIATE_TEST_SUITE_P(Catalogue, BadInputTest, ::testing::ValuesIn(bad_input_cases()),
                         [](const ::testing::TestParamInfo<BadInputCase>& param_info) {
                           return param_info.param.name;
                         });

}  // namespace
