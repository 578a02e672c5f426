// internal: a heap buffer aligned for O_DIRECT and SIMD.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace deepgrid::internal {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` rounded up to a multiple of `unit`, at least one.
inline size_t whole_units(size_t bytes, size_t unit) {
  return bytes == 0 ? unit : (bytes + unit - 1) / unit * unit;
}

// What allocate_pages(bytes, alignment) takes: whole 2 MiB pages from one on, otherwise
// `bytes` rounded up to `alignment`.
inline size_t paged_bytes(size_t bytes, size_t alignment) {
  return whole_units(bytes, bytes >= kHugePageBytes ? kHugePageBytes : alignment);
}

// Uninitialised memory of paged_bytes(bytes, alignment) bytes, aligned to `alignment`; from
// one huge page on, aligned to 2 MiB and advised onto huge pages where the kernel allows it
// (fewer TLB misses for data streamed through, fewer pages to pin for direct I/O). The advice
// comes before anything touches the pages: with THP in "madvise" mode, pages already touched
// stay 4 KiB until khugepaged gets to them. nullptr when out of memory; std::free releases it.
inline void* allocate_pages(size_t bytes, size_t alignment) {
  const bool huge = bytes >= kHugePageBytes;
  const size_t size = paged_bytes(bytes, alignment);
  void* p = std::aligned_alloc(huge ? kHugePageBytes : alignment, size);
  if (p != nullptr && huge) ::madvise(p, size, MADV_HUGEPAGE);
  return p;
}

// `bytes` rounded up to the alignment, zero-filled; nullptr when out of memory.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes, size_t alignment = 4096)
      : AlignedBuffer(bytes, alignment, false) {}
  // Rounded up to paged_bytes(bytes, 4096): from 2 MiB on, on huge pages (allocate_pages).
  static AlignedBuffer on_huge_pages(size_t bytes) { return AlignedBuffer(bytes, 4096, true); }

  bool ok() const { return data_ != nullptr; }
  size_t size() const { return size_; }
  template <typename T = std::byte>
  T* data() const {
    return static_cast<T*>(data_.get());
  }

 private:
  AlignedBuffer(size_t bytes, size_t alignment, bool paged) {
    const size_t rounded = paged ? paged_bytes(bytes, alignment) : whole_units(bytes, alignment);
    void* p = paged ? allocate_pages(bytes, alignment) : std::aligned_alloc(alignment, rounded);
    if (p != nullptr) {
      __builtin_memset(p, 0, rounded);
      size_ = rounded;
    }
    data_.reset(p);
  }
  std::unique_ptr<void, FreeDeleter> data_;
  size_t size_ = 0;
};

}  // namespace deepgrid::internal
