// internal: computing with subnormal numbers flushed to zero (RunOptions::flush_subnormals).
//
// x86 computes with subnormal numbers (below 1.18e-38 in f32, 2.2e-308 in f64) through a slow
// microcode path, far slower per operation than normal numbers: a field decaying into zero (the
// tail of a diffusing Gaussian) slowed a whole run 3.7-5 times (docs/performance/stream.md). With
// MXCSR's DAZ (subnormal inputs read as zero) and FTZ (subnormal results written as zero) the
// arithmetic stays at full speed. The results are no longer IEEE's below the normal range, but they
// are deterministic: every engine that sets the mode on each thread that computes (and the tests'
// scalar reference, under the same mode) gets the same bits.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace deepgrid::internal {

// Whether this build can flush subnormals (x86 with SSE, or AArch64).
constexpr bool can_flush_subnormals() {
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

// While it lives, the calling thread flushes subnormals to zero, if `flush` (and the build can:
// the run's options are checked against can_flush_subnormals() first); then the thread's mode
// is what it was. Each thread that computes a run's values holds one: OpenMP's threads do not
// take the mode of the thread that starts them.
class SubnormalsFlushed {
 public:
  explicit SubnormalsFlushed(bool flush) : active_(flush && can_flush_subnormals()) {
    if (!active_) return;
    saved_ = read_mode();
    write_mode(saved_ | kFlushBits);
  }
  ~SubnormalsFlushed() {
    if (active_) write_mode(saved_);
  }
  SubnormalsFlushed(const SubnormalsFlushed&) = delete;
  SubnormalsFlushed& operator=(const SubnormalsFlushed&) = delete;

 private:
#if defined(__x86_64__) || defined(__i386__)
  static constexpr uint64_t kFlushBits = 0x8040;  // MXCSR: FTZ (bit 15) and DAZ (bit 6)
  static uint64_t read_mode() { return _mm_getcsr(); }
  static void write_mode(uint64_t mode) { _mm_setcsr(static_cast<unsigned>(mode)); }
#elif defined(__aarch64__)
  static constexpr uint64_t kFlushBits = uint64_t{1} << 24;  // FPCR.FZ: inputs and results
  static uint64_t read_mode() {
    uint64_t mode = 0;
    asm volatile("mrs %0, fpcr" : "=r"(mode));
    return mode;
  }
  static void write_mode(uint64_t mode) { asm volatile("msr fpcr, %0" : : "r"(mode)); }
#else
  static constexpr uint64_t kFlushBits = 0;
  static uint64_t read_mode() { return 0; }
  static void write_mode(uint64_t) {}
#endif

  bool active_;
  uint64_t saved_ = 0;
};

}  // namespace deepgrid::internal
