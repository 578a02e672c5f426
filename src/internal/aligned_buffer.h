// internal: a heap buffer aligned for O_DIRECT and SIMD.
#pragma once

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
  explicit AlignedBuffer(size_t bytes, size_t alignment = 4096) {
    size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    if (rounded == 0) rounded = alignment;
    void* p = std::aligned_alloc(alignment, rounded);
    if (p != nullptr) {
      __builtin_memset(p, 0, rounded);
      size_ = rounded;
    }
    data_.reset(p);
  }
  bool ok() const { return data_ != nullptr; }
  size_t size() const { return size_; }
  template <typename T = std::byte>
  T* data() const {
    return static_cast<T*>(data_.get());
  }

 private:
  std::unique_ptr<void, FreeDeleter> data_;
  size_t size_ = 0;
};

}  // namespace deepgrid::internal
