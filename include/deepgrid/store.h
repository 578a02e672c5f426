// The on-disk grid: a directory with a JSON manifest and data files laid out for direct I/O.
//
// Layout: plane z (nx * ny values, x fastest) occupies `plane_stride` bytes, plane_bytes
// rounded up to 4096. Planes are grouped into chunks of `planes_per_chunk`; chunk c lives in
// file c % S (S = number of store directories) at byte offset (c / S) * chunk_bytes. Values
// are little-endian IEEE.
//
// The manifest (DIR/manifest.json) is replaced atomically: written to a temporary file,
// fsynced, renamed over the old one, and the directory fsynced.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepgrid/dtype.h"
#include "deepgrid/geometry.h"
#include "deepgrid/init.h"
#include "deepgrid/status.h"

namespace deepgrid {

inline constexpr int kManifestVersion = 1;
inline constexpr int64_t kDirectIoAlignment = 4096;

struct DataFile {
  std::string path;  // relative to the grid directory, or absolute
  int64_t bytes = 0;
};

struct Layout {
  int64_t plane_bytes = 0;   // nx * ny * dtype size
  int64_t plane_stride = 0;  // plane_bytes rounded up to kDirectIoAlignment
  int64_t planes_per_chunk = 0;
  std::vector<DataFile> files;  // one per store directory

  int64_t chunk_bytes() const { return planes_per_chunk * plane_stride; }
};

// Where plane z is: file index and byte offset.
struct PlaneLocation {
  int file = 0;
  int64_t offset = 0;
};

// One entry of a grid's history (create, run, import).
struct HistoryEntry {
  std::string date;     // ISO 8601 UTC
  std::string command;  // "create", "run", "import"
  std::string details;  // JSON object text with the command's parameters and results
};

struct Manifest {
  int version = kManifestVersion;
  std::string id;
  Shape shape;
  DType dtype = DType::kF32;
  Layout layout;
  int64_t step = 0;
  std::vector<HistoryEntry> history;

  PlaneLocation locate(int64_t z) const;
  std::string to_json() const;
  // Parses and checks the manifest's own consistency (not the data files).
  static Result<Manifest> from_json(std::string_view text);
};

struct CreateOptions {
  Shape shape;
  DType dtype = DType::kF32;
  InitSpec init;
  std::vector<std::string> stores;  // data directories; empty = the grid directory itself
  int64_t chunk_target_bytes = 8 << 20;
};

// The layout create() would use, and the bytes each store directory needs.
Result<Layout> plan_layout(const Shape& shape, DType dtype, size_t n_stores,
                           int64_t chunk_target_bytes);

class Grid {
 public:
  enum class Mode { kReadOnly, kReadWrite };

  // Creates DIR (which must not exist, or be an empty directory) and its data files, filled
  // with the initial condition. Checks free space before writing anything; on failure removes
  // what it created.
  static Result<Grid> create(const std::string& dir, const CreateOptions& options);
  // Opens an existing grid, checking the manifest and the data files' sizes.
  static Result<Grid> open(const std::string& dir, Mode mode = Mode::kReadOnly);

  Grid(Grid&&) noexcept;
  Grid& operator=(Grid&&) noexcept;
  ~Grid();

  const Manifest& manifest() const { return manifest_; }
  const std::string& dir() const { return dir_; }
  const Shape& shape() const { return manifest_.shape; }
  DType dtype() const { return manifest_.dtype; }
  // Whether the data files were opened with O_DIRECT (false on filesystems refusing it).
  bool direct_io() const { return direct_io_; }
  std::string file_path(int file) const;                              // path of data file `file`
  int fd(int file) const { return fds_[static_cast<size_t>(file)]; }  // for direct block I/O

  // Reads planes [z0, z0 + count) into `dst`, packed (count * nx * ny values, no padding).
  Status read_planes(int64_t z0, int64_t count, void* dst) const;
  // Writes packed planes [z0, z0 + count) from `src`.
  Status write_planes(int64_t z0, int64_t count, const void* src);

  // Atomically replaces the manifest with `m` (same layout), fsyncing data files first.
  Status commit(const Manifest& m);
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  Grid() = default;
  Status open_files(Mode mode);
  template <typename Copy>
  Status transfer_planes(int64_t z0, int64_t count, bool write, Copy copy) const;

  std::string dir_;
  Manifest manifest_;
  std::vector<int> fds_;
  bool direct_io_ = false;
  mutable uint64_t bytes_read_ = 0;
  uint64_t bytes_written_ = 0;
};

// Current time as ISO 8601 UTC ("2026-11-22T20:25:30Z").
std::string utc_now();

}  // namespace deepgrid
