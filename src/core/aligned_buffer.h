// internal: page memory for buffers aligned for O_DIRECT and SIMD.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

namespace deepgrid::internal {

inline constexpr size_t kPageBytes = 4096;
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// Values of `value_bytes` bytes per 64-byte cache line: a vector load or store that starts on
// a line touches one line, one that does not touches two.
inline constexpr int64_t line_values(size_t value_bytes) {
  return 64 / static_cast<int64_t>(value_bytes);
}

// `bytes` rounded up to a multiple of `unit`, at least one.
inline size_t whole_units(size_t bytes, size_t unit) {
  return bytes == 0 ? unit : (bytes + unit - 1) / unit * unit;
}

// Whether allocate_pages(bytes, huge) takes whole 2 MiB pages.
inline bool on_huge_pages(size_t bytes, bool huge) { return huge && bytes >= kHugePageBytes; }

// What allocate_pages(bytes, huge) takes: whole 2 MiB pages on huge pages, otherwise whole
// pages.
inline size_t paged_bytes(size_t bytes, bool huge = true) {
  return whole_units(bytes, on_huge_pages(bytes, huge) ? kHugePageBytes : kPageBytes);
}

// Buffers come from the kernel (mmap) and go back to it when freed, not through malloc: glibc
// raises its mmap threshold each time a large block is freed and then serves, and keeps, freed
// blocks below it, so what one phase freed (the machine measurement before a run, an earlier
// run in the same process) stayed resident beside the next one's buffers and pushed the
// process over --mem (a first run with --mem 128MiB peaked at 255 MiB). Under
// AddressSanitizer they come from the checker's allocator instead, which guards their ends.
#if defined(__SANITIZE_ADDRESS__)
#define DEEPGRID_PAGES_FROM_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DEEPGRID_PAGES_FROM_MALLOC 1
#endif
#endif

// Uninitialised memory of paged_bytes(bytes, huge) bytes, page-aligned; with `huge`, from one
// huge page on, aligned to 2 MiB and advised onto huge pages where the kernel allows it (fewer
// TLB misses for data streamed through, fewer pages to pin for direct I/O; the advice comes
// before anything touches the pages: with THP in "madvise" mode, pages already touched stay
// 4 KiB until khugepaged gets to them). nullptr when out of memory; release_pages(p, bytes,
// huge) gives it back.
inline void* allocate_pages(size_t bytes, bool huge = true) {
  const size_t size = paged_bytes(bytes, huge);
  const size_t alignment = on_huge_pages(bytes, huge) ? kHugePageBytes : kPageBytes;
#ifdef DEEPGRID_PAGES_FROM_MALLOC
  void* p = std::aligned_alloc(alignment, size);
#else
  // Map `alignment` more than needed and unmap what lies before and after the aligned range.
  const size_t extra = alignment - kPageBytes;
  void* m =
      ::mmap(nullptr, size + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* base = static_cast<std::byte*>(m);
  const size_t head = (alignment - reinterpret_cast<uintptr_t>(base) % alignment) % alignment;
  if (head > 0) ::munmap(base, head);
  if (extra > head) ::munmap(base + head + size, extra - head);
  void* p = base + head;
#endif
  if (p != nullptr && on_huge_pages(bytes, huge)) ::madvise(p, size, MADV_HUGEPAGE);
  return p;
}

inline void release_pages(void* p, size_t bytes, bool huge = true) {
  if (p == nullptr) return;
#ifdef DEEPGRID_PAGES_FROM_MALLOC
  (void)bytes;
  (void)huge;
  std::free(p);
#else
  ::munmap(p, paged_bytes(bytes, huge));
#endif
}

// Gives back allocate_pages(bytes, huge) memory.
struct PageRelease {
  size_t bytes = 0;
  bool huge = false;
  void operator()(void* p) const { release_pages(p, bytes, huge); }
};

// paged_bytes(bytes, huge) of zeros, faulted in, page-aligned (allocate_pages); not ok() when
// out of memory.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) : AlignedBuffer(bytes, false) {}
  // From 2 MiB on, advised onto huge pages (allocate_pages).
  static AlignedBuffer on_huge_pages(size_t bytes) { return AlignedBuffer(bytes, true); }

  bool ok() const { return data_ != nullptr; }
  size_t size() const { return data_.get_deleter().bytes; }  // paged_bytes()
  template <typename T = std::byte>
  T* data() const {
    return static_cast<T*>(data_.get());
  }

 private:
  AlignedBuffer(size_t bytes, bool huge) {
    void* p = allocate_pages(bytes, huge);
    if (p == nullptr) return;
    const size_t size = paged_bytes(bytes, huge);
    // Fresh pages read as zeros, but are faulted in here rather than in the timed passes.
    __builtin_memset(p, 0, size);
    data_ = std::unique_ptr<void, PageRelease>(p, PageRelease{size, huge});
  }
  std::unique_ptr<void, PageRelease> data_;
};

// Scratch page memory for contents of varying size: hold(bytes) gives at least `bytes`,
// allocating (contents dropped) only when asked for more than it has; nullptr when out of
// memory. Aligned, so that a grid's planes are read into it without a bounce buffer.
class ScratchPages {
 public:
  std::byte* hold(size_t bytes) {
    if (!buffer_.ok() || bytes > buffer_.size()) buffer_ = AlignedBuffer(bytes);
    return buffer_.ok() ? buffer_.data() : nullptr;
  }

 private:
  AlignedBuffer buffer_;
};

}  // namespace deepgrid::internal
