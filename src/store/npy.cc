#include "deepgrid/npy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "deepgrid/box_io.h"
#include "deepgrid/plane_transfer.h"

namespace deepgrid {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

Status bad_npy(const std::string& path, const std::string& why) {
  return invalid_argument(path + " is not a supported .npy file: " + why +
                          " (deepgrid reads little-endian float32/float64 arrays in C order with "
                          "shape (nz, ny, nx) or (ny, nx))");
}

// Bytes appended to a new file from its start, written in whole 4096-byte blocks of an
// aligned buffer, so that a file opened with O_DIRECT takes them (an export then runs at the
// disk's speed and leaves the page cache alone: a 4 GiB export spent 83% of its time copying
// into the page cache); finish() pads the last block and cuts the file to the bytes appended.
class BlockAppender {
 public:
  static constexpr size_t kBufferBytes = size_t{8} << 20;
  BlockAppender(int fd, std::string path)
      : fd_(fd), path_(std::move(path)), buffer_(kBufferBytes) {}
  bool ok() const { return buffer_.ok(); }

  Status append(const void* bytes, size_t n) {
    const auto* p = static_cast<const std::byte*>(bytes);
    while (n > 0) {
      const size_t take = std::min(n, kBufferBytes - used_);
      std::memcpy(buffer_.data() + used_, p, take);
      used_ += take;
      p += take;
      n -= take;
      if (used_ == kBufferBytes) DG_RETURN_IF_ERROR(flush(kBufferBytes));
    }
    return Status::Ok();
  }
  Status finish() {
    const int64_t total = written_ + static_cast<int64_t>(used_);
    if (used_ > 0) {
      const size_t whole = internal::whole_units(used_, internal::kPageBytes);
      std::memset(buffer_.data() + used_, 0, whole - used_);
      DG_RETURN_IF_ERROR(flush(whole));
    }
    if (::ftruncate(fd_, total) != 0) return errno_status(errno, "truncate", path_);
    return Status::Ok();
  }

 private:
  Status flush(size_t bytes) {
    DG_RETURN_IF_ERROR(internal::pwrite_full(fd_, buffer_.data(), bytes, written_, path_));
    written_ += static_cast<int64_t>(bytes);
    used_ = 0;
    return Status::Ok();
  }

  int fd_;
  std::string path_;
  internal::AlignedBuffer buffer_;
  size_t used_ = 0;
  int64_t written_ = 0;  // bytes written before the buffer's first
};

// The text after "'key':" in a .npy header dict, leading spaces removed; empty if absent.
std::string dict_value(const std::string& header, const std::string& key) {
  size_t pos = header.find("'" + key + "'");
  if (pos == std::string::npos) return {};
  pos = header.find(':', pos);
  if (pos == std::string::npos) return {};
  pos = header.find_first_not_of(' ', pos + 1);
  return pos == std::string::npos ? std::string() : header.substr(pos);
}

}  // namespace

Result<NpyHeader> read_npy_header(const std::string& path) {
  internal::OwnedFd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return errno_status(errno, "open", path);
  char pre[12];
  ssize_t got = ::pread(f.fd, pre, sizeof pre, 0);
  if (got < 10 || std::memcmp(pre, kMagic, 6) != 0) return bad_npy(path, "no NumPy magic");
  const int major = static_cast<unsigned char>(pre[6]);
  int64_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(pre[8]) | (static_cast<unsigned char>(pre[9]) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (got < 12) return bad_npy(path, "truncated header");
    uint32_t len = 0;
    std::memcpy(&len, pre + 8, 4);
    header_len = len;
    header_start = 12;
  } else {
    return bad_npy(path, "unknown format version " + std::to_string(major));
  }
  if (header_len > (1 << 20)) return bad_npy(path, "header too long");
  std::string header(static_cast<size_t>(header_len), '\0');
  DG_RETURN_IF_ERROR(internal::pread_full(f.fd, header.data(), header.size(), header_start, path));

  NpyHeader h;
  const std::string descr = dict_value(header, "descr");
  if (descr.size() < 4 || descr.front() != '\'') return bad_npy(path, "no dtype");
  const std::string code = descr.substr(1, descr.find('\'', 1) - 1);  // e.g. <f4
  if (code == "<f4" || code == "=f4")
    h.dtype = DType::kF32;
  else if (code == "<f8" || code == "=f8")
    h.dtype = DType::kF64;
  else
    return bad_npy(path, "dtype " + code);
  if (dict_value(header, "fortran_order").rfind("True", 0) == 0) {
    return bad_npy(path, "Fortran order");
  }
  const std::string shape = dict_value(header, "shape");
  if (shape.empty() || shape.front() != '(' || shape.find(')') == std::string::npos) {
    return bad_npy(path, "no shape");
  }
  std::vector<int64_t> dims;
  for (size_t i = 1; i < shape.find(')');) {
    if (std::isdigit(static_cast<unsigned char>(shape[i]))) {
      size_t used = 0;
      dims.push_back(std::stoll(shape.substr(i, 18), &used));
      i += used;
    } else {
      ++i;
    }
  }
  if (dims.size() == 3)
    h.shape = {dims[2], dims[1], dims[0]};
  else if (dims.size() == 2)
    h.shape = {dims[1], dims[0], 1};
  else
    return bad_npy(path, std::to_string(dims.size()) + " dimensions");
  DG_RETURN_IF_ERROR(validate_shape(h.shape).with_context(path));
  h.data_offset = header_start + header_len;
  const off_t size = ::lseek(f.fd, 0, SEEK_END);
  const int64_t need = h.data_offset + h.shape.points() * static_cast<int64_t>(dtype_size(h.dtype));
  if (size < need) {
    return bad_npy(path, "file has " + std::to_string(size) + " bytes, the header needs " +
                             std::to_string(need) + " (truncated)");
  }
  return h;
}

Result<Grid> import_npy(const std::string& npy_path, const std::string& dir,
                        const std::vector<std::string>& stores) {
  DG_ASSIGN_OR_RETURN(NpyHeader h, read_npy_header(npy_path));
  CreateOptions opt;
  opt.shape = h.shape;
  opt.dtype = h.dtype;
  opt.stores = stores;
  DG_ASSIGN_OR_RETURN(Grid grid, Grid::create(dir, opt));
  internal::OwnedFd f;
  f.fd = ::open(npy_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return errno_status(errno, "open", npy_path);
  const int64_t plane_bytes = grid.manifest().layout.plane_bytes;
  DG_RETURN_IF_ERROR(io::write_plane_range(grid, 0, h.shape.nz, [&](int64_t z, void* values) {
    return internal::pread_full(f.fd, values, static_cast<size_t>(plane_bytes),
                                h.data_offset + z * plane_bytes, npy_path);
  }));
  Manifest m = grid.manifest();
  m.history.push_back({utc_now(), "import", "{\"from\": \"npy\"}"});
  DG_RETURN_IF_ERROR(grid.commit(m));
  return grid;
}

Status export_npy(const Grid& grid, const std::string& npy_path, int component) {
  const Manifest& m = grid.manifest();
  if (component < 0 || component >= m.components()) {
    return invalid_argument("the grid has no component " + std::to_string(component));
  }
  return export_npy_planes(m.shape, m.dtype, io::component_of(io::planes_of(grid), m, component),
                           npy_path);
}

Status check_npy_fits(const NpyHeader& h, const std::string& path, const Shape& shape,
                      DType dtype) {
  if (h.shape == shape && h.dtype == dtype) return Status::Ok();
  return invalid_argument(path + " holds " + h.shape.to_string() + " " +
                          std::string(dtype_name(h.dtype)) + " values but the grid is " +
                          shape.to_string() + " " + std::string(dtype_name(dtype)) +
                          "; give an array of the grid's shape (nz, ny, nx) and dtype");
}

Status import_npy_field(const std::string& npy_path, Grid& grid, int component) {
  DG_ASSIGN_OR_RETURN(NpyHeader h, read_npy_header(npy_path));
  const Manifest& m = grid.manifest();
  DG_RETURN_IF_ERROR(check_npy_fits(h, npy_path, m.shape, m.dtype));
  internal::OwnedFd f;
  f.fd = ::open(npy_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) return errno_status(errno, "open", npy_path);
  const int64_t plane_bytes = m.shape.plane_points() * static_cast<int64_t>(dtype_size(m.dtype));
  const int64_t batch = std::clamp<int64_t>((64 << 20) / plane_bytes, 1, m.shape.nz);
  std::vector<std::byte> values(static_cast<size_t>(batch * plane_bytes));
  for (int64_t z0 = 0; z0 < m.shape.nz; z0 += batch) {
    const int64_t n = std::min(batch, m.shape.nz - z0);
    DG_RETURN_IF_ERROR(internal::pread_full(f.fd, values.data(),
                                            static_cast<size_t>(n * plane_bytes),
                                            h.data_offset + z0 * plane_bytes, npy_path));
    Box box = whole_grid_box(m.shape);
    box.z = {z0, n, 1};
    box.component = component;
    DG_RETURN_IF_ERROR(write_box(grid, box, values.data()));
  }
  return Status::Ok();
}

std::string npy_header(DType dtype, const std::vector<int64_t>& dims) {
  std::string shape;  // a Python tuple: "(3, 4)", "(3,)"
  for (size_t i = 0; i < dims.size(); ++i) shape += (i ? ", " : "") + std::to_string(dims[i]);
  if (dims.size() == 1) shape += ",";
  std::string dict = "{'descr': '<" + std::string(dtype == DType::kF32 ? "f4" : "f8") +
                     "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // Pad so that the data starts on a 64-byte boundary, ending the header with '\n'.
  const size_t prefix = 10;
  const size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string header(kMagic, 6);
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  header += dict;
  return header;
}

Status export_npy_planes(const Shape& s, DType dtype, const io::PlaneSource& planes,
                         const std::string& npy_path) {
  const std::string header = npy_header(dtype, {s.nz, s.ny, s.nx});
  const std::string tmp = npy_path + ".tmp";
  // O_DIRECT where the filesystem takes it (BlockAppender writes whole aligned blocks).
  constexpr int kFlags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  internal::OwnedFd f;
  f.fd = ::open(tmp.c_str(), kFlags | O_DIRECT, 0644);
  if (f.fd < 0 && errno == EINVAL) f.fd = ::open(tmp.c_str(), kFlags, 0644);
  if (f.fd < 0) return errno_status(errno, "create", tmp);
  auto fail = [&](Status st) {
    ::unlink(tmp.c_str());
    return st;
  };
  BlockAppender out(f.fd, tmp);
  if (!out.ok()) return fail(Status(ErrorCode::kResource, "out of memory for the export's buffer"));
  Status st = out.append(header.data(), header.size());
  const size_t plane_bytes = static_cast<size_t>(s.plane_points()) * dtype_size(dtype);
  if (st.ok()) {
    st = planes([&](int64_t, const void* values) { return out.append(values, plane_bytes); });
  }
  if (st.ok()) st = out.finish();
  if (!st.ok()) return fail(st);
  if (::fsync(f.fd) != 0) return fail(errno_status(errno, "fsync", tmp));
  if (::rename(tmp.c_str(), npy_path.c_str()) != 0) return fail(errno_status(errno, "rename", tmp));
  return Status::Ok();
}

}  // namespace deepgrid
