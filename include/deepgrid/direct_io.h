// What the rest of deepgrid knows of the disk I/O layer (src/io/): the alignment O_DIRECT
// transfers keep, and the backends that carry them.
#pragma once

#include <cstdint>
#include <string_view>

#include "deepgrid/status.h"

namespace deepgrid {

// Buffers, offsets and lengths of O_DIRECT transfers are multiples of this.
inline constexpr int64_t kDirectIoAlignment = 4096;

namespace io {

enum class Backend { kUring, kThreads };
std::string_view backend_name(Backend b);              // "uring", "threads"
Result<Backend> parse_backend(std::string_view text);  // "uring" | "threads"

}  // namespace io
}  // namespace deepgrid
