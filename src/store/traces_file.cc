#include "deepgrid/traces_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <vector>

#include "core/file_util.h"
#include "deepgrid/npy.h"

namespace deepgrid {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Writes the traces file whole: the held rows, NaN elsewhere (the NaN rows from one buffer
// of at most 1 MiB, written as many times as needed).
Status write_whole_traces(const Traces& t, const std::string& path, const std::string& header) {
  const size_t row_bytes = static_cast<size_t>(t.receivers) * sizeof(double);
  const int64_t before = t.held_from - t.first_step, held = t.held_steps();
  const int64_t after = t.steps - before - held;
  const int64_t nan_rows =
      std::min(std::max(before, after),
               std::max<int64_t>(1, (int64_t{1} << 20) / std::max<size_t>(row_bytes, 1)));
  const std::vector<double> nan(static_cast<size_t>(nan_rows * t.receivers), kNaN);
  std::vector<std::string_view> pieces{header};
  auto put_nan_rows = [&](int64_t rows) {
    for (; rows > 0; rows -= nan_rows) {
      pieces.emplace_back(reinterpret_cast<const char*>(nan.data()),
                          static_cast<size_t>(std::min(rows, nan_rows)) * row_bytes);
    }
  };
  put_nan_rows(before);
  pieces.emplace_back(reinterpret_cast<const char*>(t.values.data()),
                      static_cast<size_t>(held) * row_bytes);
  put_nan_rows(after);
  const std::string dir = internal::parent_path(path);
  return internal::write_file_atomic(dir.empty() ? "." : dir,
                                     path.substr(path.find_last_of('/') + 1), pieces);
}

// Reads the rows of t's window from the traces file at `path`, whose header is `h`; an error
// when it cannot, or when the file's shape is not t's.
Status read_held_rows(Traces* t, const std::string& path, const NpyHeader& h) {
  if (h.dtype != DType::kF64 || h.shape.nz != 1 || h.shape.ny != t->steps ||
      h.shape.nx != t->receivers) {
    return invalid_argument(path + " is not a traces file of " + std::to_string(t->steps) +
                            " steps and " + std::to_string(t->receivers) + " receivers");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "open", path);
  const int64_t row_bytes = t->receivers * static_cast<int64_t>(sizeof(double));
  const Status st =
      internal::pread_full(fd, t->values.data(), static_cast<size_t>(t->held_steps() * row_bytes),
                           h.data_offset + (t->held_from - t->first_step) * row_bytes, path);
  ::close(fd);
  return st;
}

}  // namespace

Status write_traces_npy(Traces& t, const std::string& path, bool sync) {
  const std::string header = npy_header(DType::kF64, {t.steps, t.receivers});
  if (t.saved_path != path) {
    DG_RETURN_IF_ERROR(write_whole_traces(t, path, header));
    t.saved_path = path;
    for (std::atomic<bool>& c : t.changed) c.store(false, std::memory_order_relaxed);
    return Status::Ok();
  }
  const size_t row_bytes = static_cast<size_t>(t.receivers) * sizeof(double);
  const auto* values = reinterpret_cast<const char*>(t.values.data());
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "open", path);
  Status st;
  const int64_t rows = t.held_steps(), row0 = t.held_from - t.first_step;
  for (int64_t first = 0; first < rows && st.ok();) {  // each run of changed rows in one write
    if (!t.changed[static_cast<size_t>(first)].exchange(false, std::memory_order_relaxed)) {
      ++first;
      continue;
    }
    int64_t end = first + 1;
    while (end < rows &&
           t.changed[static_cast<size_t>(end)].exchange(false, std::memory_order_relaxed)) {
      ++end;
    }
    st = internal::pwrite_full(
        fd, values + static_cast<size_t>(first) * row_bytes,
        static_cast<size_t>(end - first) * row_bytes,
        static_cast<int64_t>(header.size() + static_cast<size_t>(row0 + first) * row_bytes), path);
    first = end;
  }
  if (st.ok() && sync && ::fdatasync(fd) != 0) st = errno_status(errno, "fdatasync", path);
  ::close(fd);
  if (!st.ok()) {  // rows may be lost: write every held row next time
    for (int64_t row = 0; row < rows; ++row) {
      t.changed[static_cast<size_t>(row)].store(true, std::memory_order_relaxed);
    }
  }
  return st;
}

Result<NpyHeader> read_traces_header(const std::string& path) {
  DG_ASSIGN_OR_RETURN(const NpyHeader h, read_npy_header(path));
  if (h.dtype != DType::kF64 || h.shape.nz != 1) {
    return invalid_argument(path + " is not a traces file (float64, shape (steps, receivers))");
  }
  return h;
}

Result<Traces> read_traces_npy(const std::string& path) {
  DG_ASSIGN_OR_RETURN(const NpyHeader h, read_traces_header(path));
  Traces t = run_traces(0, h.shape.ny, h.shape.nx);
  DG_RETURN_IF_ERROR(read_held_rows(&t, path, h));
  t.saved_path = path;
  return t;
}

void load_held_rows(Traces* t, const std::string& saved_path) {
  if (t->receivers == 0) return;
  const Result<NpyHeader> h = read_npy_header(saved_path);
  if (h.ok() && read_held_rows(t, saved_path, *h).ok()) t->saved_path = saved_path;
}

}  // namespace deepgrid
