// Every test program's environment, set before main(): PoCL caches the kernels the device
// tests compile in DEEPGRID_POCL_CACHE_DIR (the build tree's, or the one a sanitizer build
// shares with the release build), not in the user's home, unless the caller has chosen one.
// The test programs' subprocesses (the command line) inherit it.
#include <cstdlib>

namespace {

[[maybe_unused]] const bool kPoclCacheChosen = [] {
  return setenv("POCL_CACHE_DIR", DEEPGRID_POCL_CACHE_DIR, /*overwrite=*/0) == 0;
}();

}  // namespace
