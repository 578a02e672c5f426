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

// `bytes` rounded up to the alignment, zero-filled; nullptr when out of memory.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes, size_t alignment = 4096)
      : AlignedBuffer(bytes, alignment, false) {}
  // Large buffers on 2 MiB pages where the kernel allows it (fewer TLB misses for buffers the
  // kernel streams through, fewer pages to pin for direct I/O): rounded up to whole huge pages
  // when at least one, which huge_page_bytes() gives.
  static AlignedBuffer on_huge_pages(size_t bytes) {
    return bytes < kHugePage ? AlignedBuffer(bytes) : AlignedBuffer(bytes, kHugePage, true);
  }
  static size_t huge_page_bytes(size_t bytes) {
    return bytes < kHugePage ? (bytes + 4095) / 4096 * 4096
                             : (bytes + kHugePage - 1) / kHugePage * kHugePage;
  }

  bool ok() const { return data_ != nullptr; }
  size_t size() const { return size_; }
  template <typename T = std::byte>
  T* data() const {
    return static_cast<T*>(data_.get());
  }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  // The advice comes before the zero-fill: with THP in "madvise" mode, pages already touched
  // stay 4 KiB until khugepaged gets to them.
  AlignedBuffer(size_t bytes, size_t alignment, bool advise_huge_pages) {
    size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    if (rounded == 0) rounded = alignment;
    void* p = std::aligned_alloc(alignment, rounded);
    if (p != nullptr) {
      if (advise_huge_pages) ::madvise(p, rounded, MADV_HUGEPAGE);
      __builtin_memset(p, 0, rounded);
      size_ = rounded;
    }
    data_.reset(p);
  }
  std::unique_ptr<void, FreeDeleter> data_;
  size_t size_ = 0;
};

}  // namespace deepgrid::internal
