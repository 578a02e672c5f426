// The catalogue of bad input that tests/cli_bad_input_test.cc runs (docs/bad_input.md): what a
// case is, the setups the tables of cases share, and the tables.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace deepgrid::testing::bad_input {

namespace fs = std::filesystem;

// Prepares the temporary directory of a case (passed as its path).
using Setup = std::function<void(const fs::path&)>;

struct BadInputCase {
  std::string name;
  Setup setup;                        // may be empty
  std::vector<std::string> args;      // "{tmp}" stands for the temporary directory
  std::vector<std::string> keywords;  // the error line must contain one (case-insensitive)
  bool needs_permissions = false;     // meaningless as root
  std::string must_not_exist;         // a path outside {tmp} the command must not create

  BadInputCase(std::string name_, Setup setup_, std::vector<std::string> args_,
               std::vector<std::string> keywords_)
      : name(std::move(name_)),
        setup(std::move(setup_)),
        args(std::move(args_)),
        keywords(std::move(keywords_)) {}
  BadInputCase&& needing_permissions() && {
    needs_permissions = true;
    return std::move(*this);
  }
  BadInputCase&& not_creating(std::string path) && {
    must_not_exist = std::move(path);
    return std::move(*this);
  }
};

inline const char* const kGrid = "{tmp}/grid";

// Setups (bad_input_cases.cc).
Setup grid_of(std::string shape);
Setup grid16();  // a 16x16x4 grid at kGrid
Setup then(Setup first, Setup second);
Setup file_with(std::string name, std::string text);
Setup directory(std::string name, bool with_a_file = false);
fs::path manifest_of(const fs::path& tmp);
fs::path data_file_of(const fs::path& tmp);

// The tables, in the order of docs/bad_input.md.
std::vector<BadInputCase> create_cases();
std::vector<BadInputCase> kernel_cases();
std::vector<BadInputCase> run_option_cases();
std::vector<BadInputCase> scheme_and_probe_cases();
std::vector<BadInputCase> segy_cases();
std::vector<BadInputCase> broken_grid_cases();
std::vector<BadInputCase> damaged_value_cases();
std::vector<BadInputCase> more_option_cases();
std::vector<BadInputCase> split_cases();  // bad_input_trust_cases.cc
std::vector<BadInputCase> missing_directory_cases();
std::vector<BadInputCase> trust_cases();  // bad_input_trust_cases.cc

}  // namespace deepgrid::testing::bad_input
