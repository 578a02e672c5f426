#include "cli/progress.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>

namespace deepgrid::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void on_signal(int) { g_interrupted.store(true); }

struct Bar {
  const char* label;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last{};

  void draw(int64_t done, int64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (done < total && now - last < std::chrono::milliseconds(100)) return;
    last = now;
    const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1;
    const double elapsed = std::chrono::duration<double>(now - start).count();
    const double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
    constexpr int kWidth = 30;
    char bar[kWidth + 1];
    for (int i = 0; i < kWidth; ++i) bar[i] = i < static_cast<int>(frac * kWidth) ? '#' : ' ';
    bar[kWidth] = 0;
    std::fprintf(stderr, "\r%s [%s] %3d%%  step %lld/%lld  elapsed %.0fs  ETA %.0fs ", label, bar,
                 static_cast<int>(frac * 100), static_cast<long long>(done),
                 static_cast<long long>(total), elapsed, eta);
    if (done >= total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
};

}  // namespace

bool interrupted() { return g_interrupted.load(); }

void install_interrupt_handler() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

ProgressFn terminal_progress(const char* label) {
  if (!::isatty(STDERR_FILENO)) {
    return [](int64_t, int64_t) { return !interrupted(); };
  }
  auto bar = std::make_shared<Bar>();
  bar->label = label;
  return [bar](int64_t done, int64_t total) {
    bar->draw(done, total);
    if (interrupted()) {
      std::fprintf(stderr, "\ninterrupted: stopping after step %lld\n",
                   static_cast<long long>(done));
      return false;
    }
    return true;
  };
}

}  // namespace deepgrid::cli
