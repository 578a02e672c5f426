// Creating, importing and splitting distributed grids: each rank makes its own part (an
// ordinary grid) with its block's values (an initial condition's, a .npy file's, a serial
// grid's), and rank 0 the manifest naming them all, or, when any rank fails, nothing stays
// behind. A field imported into an existing grid goes into each part in place.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "deepgrid/box_io.h"
#include "deepgrid/init.h"
#include "deepgrid/npy.h"
#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "mpi/parts.h"
#include "run/lifecycle.h"
#include "store/grid_files.h"
#include "store/grid_paths.h"

namespace deepgrid::mpi {

using nlohmann::json;
using namespace detail;

namespace {

// The store directories of this rank: "%r" stands for its number.
std::vector<std::string> expand_rank(const std::vector<std::string>& patterns, int r) {
  std::vector<std::string> out;
  for (std::string p : patterns) {
    for (size_t at = p.find("%r"); at != std::string::npos; at = p.find("%r", at)) {
      p.replace(at, 2, std::to_string(r));
    }
    out.push_back(p);
  }
  return out;
}

// Rank 0's part of create: DIR must be new (or empty) and is made here.
Status make_top_directory(const std::string& dir, bool* made) {
  DG_ASSIGN_OR_RETURN(const bool existed, internal::check_new_grid_dir(dir));
  if (existed) return Status::Ok();
  if (::mkdir(dir.c_str(), 0755) != 0) return errno_status(errno, "create directory", dir);
  *made = true;
  return Status::Ok();
}

}  // namespace

Status detail::write_block(Grid& part, const Block& block,
                           const std::function<Status(int64_t, std::byte*)>& produce) {
  // Aligned, so that write_planes sends it to the files without a bounce buffer.
  internal::AlignedBuffer values(internal::plane_format(part.manifest()).rect_bytes(block));
  if (!values.ok()) return Status(ErrorCode::kResource, "out of memory for a plane");
  for (int64_t z = block[kAxisZ].lo; z < block[kAxisZ].hi; ++z) {
    DG_RETURN_IF_ERROR(produce(z, values.data()));
    DG_RETURN_IF_ERROR(part.write_planes(z - block[kAxisZ].lo, 1, values.data()));
  }
  return Status::Ok();
}

namespace {

// Fills parts from whole global planes: produce(z, plane) writes global plane z.
Status write_block_from_planes(Grid& part, const Block& block, const Shape& shape,
                               const std::function<Status(int64_t, std::byte*)>& produce) {
  const internal::PlaneFormat format =
      internal::plane_format(shape, part.dtype(), part.manifest().components());
  std::vector<std::byte> plane(format.bytes());
  return write_block(part, block, [&](int64_t z, std::byte* values) {
    DG_RETURN_IF_ERROR(produce(z, plane.data()));
    internal::copy_rect(plane.data(), format, block, values, internal::RectCopy::kToPacked);
    return Status::Ok();
  });
}

// The initial values of each component of a new grid: `init`, or each field's.
std::vector<InitSpec> component_inits(const CreateOptions& options) {
  if (options.fields.empty()) return {options.init};
  std::vector<InitSpec> out;
  for (const FieldInit& f : options.fields) out.push_back(f.init);
  return out;
}

// The initial condition at the planes' global coordinates, every component's.
BlockSource initial_condition(const CreateOptions& global) {
  BlockSource source;
  source.command = "create";
  source.details = {{"shape", global.shape.to_string()},
                    {"dtype", dtype_name(global.dtype)},
                    {"init", global.init.to_string()}};
  if (!global.scheme.empty()) source.details["scheme"] = json::parse(global.scheme);
  const std::vector<InitSpec> inits = component_inits(global);
  source.fill = [global, inits](Grid& part, const Block& block) -> Status {
    const bool zeros = std::all_of(inits.begin(), inits.end(), [](const InitSpec& i) {
      return i.kind == InitSpec::Kind::kZero;
    });
    if (zeros) return Status::Ok();  // created as zeros
    const int64_t component_points = global.shape.plane_points();
    return write_block_from_planes(part, block, global.shape, [&](int64_t z, std::byte* out) {
      dispatch_dtype(global.dtype, [&](auto tag) {
        using T = decltype(tag);
        for (size_t c = 0; c < inits.size(); ++c) {
          init_plane(inits[c], global.shape, z,
                     reinterpret_cast<T*>(out) + static_cast<int64_t>(c) * component_points);
        }
      });
      return Status::Ok();
    });
  };
  return source;
}

// The planes of a .npy file every rank can read (a shared filesystem, or one machine).
BlockSource npy_planes(const std::string& path, const NpyHeader& header) {
  BlockSource source;
  source.command = "import";
  source.details = {{"from", "npy"}, {"file", internal::absolute_path(path)}};
  source.fill = [path, header](Grid& part, const Block& block) -> Status {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_status(errno, "open", path);
    const int64_t plane_bytes =
        header.shape.plane_points() * static_cast<int64_t>(dtype_size(header.dtype));
    const Status st =
        write_block_from_planes(part, block, header.shape, [&](int64_t z, std::byte* out) {
          return internal::pread_full(fd, out, static_cast<size_t>(plane_bytes),
                                      header.data_offset + z * plane_bytes, path);
        });
    ::close(fd);
    return st;
  };
  return source;
}

// The block's rectangle of each plane of a serial grid, handed out plane by plane packed as
// the part's planes are. The planes are read in boxes (read_box: only the blocks of the disk
// that hold the block's rows are read), one per component, of as many planes as `read_bytes`
// holds, at least one.
class BoxReader {
 public:
  BoxReader(const Grid& src, const Block& block, int64_t read_bytes)
      : src_(src),
        block_(block),
        rect_{block.size(kAxisX), block.size(kAxisY), src.manifest().components(),
              dtype_size(src.dtype())},
        batch_(std::clamp<int64_t>(read_bytes / static_cast<int64_t>(rect_.bytes()), 1,
                                   block.size(kAxisZ))),
        boxes_(static_cast<size_t>(batch_) * rect_.bytes()) {}

  // Global plane z of the block (planes asked for in increasing order), into `out`.
  Status plane(int64_t z, std::byte* out) {
    if (first_ < 0 || z < first_ || z >= first_ + count_) DG_RETURN_IF_ERROR(read_from(z));
    const size_t field_plane = rect_.bytes() / static_cast<size_t>(rect_.components);
    // Component c's boxes lie one after another: plane z of c is (c * count_ + z - first_)
    // field planes in.
    const internal::PlaneLayout layout = {static_cast<size_t>(rect_.nx) * rect_.value_bytes,
                                          static_cast<size_t>(count_) * field_plane};
    const Block whole = {{Span{0, rect_.nx}, Span{0, rect_.ny}, Span{0, 1}}};
    internal::copy_rect(boxes_.data() + static_cast<size_t>(z - first_) * field_plane, layout,
                        rect_, whole, out, internal::RectCopy::kToPacked);
    return Status::Ok();
  }

 private:
  Status read_from(int64_t z) {
    count_ = std::min(batch_, block_[kAxisZ].hi - z);
    first_ = z;
    const size_t component_bytes =
        static_cast<size_t>(count_) * rect_.bytes() / static_cast<size_t>(rect_.components);
    for (int c = 0; c < rect_.components; ++c) {
      Box box;
      box.z = {z, count_, 1};
      box.y = {block_[kAxisY].lo, rect_.ny, 1};
      box.x = {block_[kAxisX].lo, rect_.nx, 1};
      box.component = c;
      DG_RETURN_IF_ERROR(
          read_box(src_, box, boxes_.data() + static_cast<size_t>(c) * component_bytes));
    }
    return Status::Ok();
  }

  const Grid& src_;
  const Block block_;
  const internal::PlaneFormat rect_;  // the block's planes
  const int64_t batch_;               // planes read at once
  std::vector<std::byte> boxes_;
  int64_t first_ = -1, count_ = 0;  // the planes in boxes_
};

// The values of serial grid `src` (held open while the parts are filled) at the same global
// coordinates, at its step and with its history. Each rank reads its block alone (BoxReader);
// when src verifies its reads (enable_verification), whole planes instead, as its checksums
// cover whole planes only.
BlockSource serial_grid(const Grid& src, int64_t read_bytes) {
  BlockSource source;
  source.command = "split";
  source.details = {{"from", internal::absolute_path(src.dir())},
                    {"from_id", src.manifest().id},
                    {"step", src.manifest().step}};
  source.step = src.manifest().step;
  source.history = src.manifest().history;
  source.fill = [&src, read_bytes](Grid& part, const Block& block) -> Status {
    if (src.verifying()) {
      return write_block_from_planes(part, block, src.shape(), [&](int64_t z, std::byte* plane) {
        return src.read_planes(z, 1, plane);
      });
    }
    BoxReader reader(src, block, read_bytes);
    return write_block(part, block,
                       [&](int64_t z, std::byte* out) { return reader.plane(z, out); });
  };
  return source;
}

}  // namespace

Result<PartInfo> detail::create_part(const std::string& dir, const std::string& id,
                                     const CreateOptions& global, const BlockSource& source,
                                     const Block& block) {
  PartInfo info;
  info.block = block;
  info.stores = expand_rank(global.stores, rank());
  for (std::string& s : info.stores) s = internal::normal_store_path(s);
  for (const std::string& s : info.stores) {  // the part's directory goes into the first
    if (!internal::is_directory(s)) {
      return invalid_argument("store directory " + s + " does not exist; create it first");
    }
  }
  info.dir = part_directory(dir, id, rank(), info.stores);
  CreateOptions opt = part_options(global, info);
  opt.spare_planes = global.spare_planes;
  Status st;
  {
    DG_ASSIGN_OR_RETURN(Grid part, Grid::create(info.dir, opt));
    st = source.fill(part, block);
    if (st.ok()) {
      st = commit_with_history(part, source.step, "part",
                               {{"grid", internal::absolute_path(dir)},
                                {"rank", rank()},
                                {"block", block.to_string()},
                                {source.command, source.details}});
    }
  }  // (closed: remove_part() must take the part's lock; it was left behind while this held it)
  if (!st.ok()) {
    (void)remove_part(info.dir);
    return st;
  }
  return info;
}

namespace {

Result<DistributedManifest> make_distributed(const std::string& dir, const CreateOptions& options,
                                             const std::optional<ProcessGrid>& procs,
                                             const BlockSource& source) {
  DG_ASSIGN_OR_RETURN(const ProcessGrid grid, process_grid_for(options.shape, procs));
  const std::vector<Block> blocks = decompose(options.shape, grid);
  DG_RETURN_IF_ERROR(plan_layout(options.shape, options.dtype, 1, kDirectIoAlignment, 0,
                                 std::max<int>(1, static_cast<int>(options.fields.size())))
                         .status());
  bool made_dir = false;
  DG_RETURN_IF_ERROR(agree(rank() == 0 ? make_top_directory(dir, &made_dir) : Status::Ok()));
  DistributedManifest m;
  m.dir = dir;
  m.id = broadcast(rank() == 0 ? new_id() : std::string());
  m.shape = options.shape;
  m.dtype = options.dtype;
  m.step = source.step;
  m.history = source.history;
  for (const FieldInit& f : options.fields) m.fields.push_back(f.name);
  m.scheme = options.scheme;
  m.procs = grid;
  m.parts.resize(blocks.size());
  for (size_t r = 0; r < blocks.size(); ++r) m.parts[r].block = blocks[r];
  auto part = create_part(dir, m.id, options, source, blocks[static_cast<size_t>(rank())]);
  Status st = agree(part.status());
  if (st.ok()) {
    share_parts(&m, *part);
    json details = source.details;
    details["ranks"] = size();
    details["process_grid"] = grid.to_string();
    m.history.push_back({utc_now(), source.command, details.dump()});
    st = write_on_root(dir, m);
  }
  if (!st.ok()) {  // nothing stays behind
    if (part.ok()) (void)remove_part(part->dir);
    if (made_dir) {
      ::unlink(internal::join_path(dir, "manifest.json").c_str());
      ::rmdir(dir.c_str());
    }
    barrier();  // every rank returns once nothing is left
    return st;
  }
  return m;
}

}  // namespace

Result<DistributedManifest> create_distributed(const std::string& dir, const CreateOptions& options,
                                               const std::optional<ProcessGrid>& procs) {
  return make_distributed(dir, options, procs, initial_condition(options));
}

Result<DistributedManifest> import_distributed(const std::string& npy_path, const std::string& dir,
                                               const std::vector<std::string>& stores,
                                               const std::optional<ProcessGrid>& procs) {
  auto header = read_npy_header(npy_path);
  DG_RETURN_IF_ERROR(agree(header.status()));
  CreateOptions options;
  options.shape = header->shape;
  options.dtype = header->dtype;
  options.stores = stores;
  return make_distributed(dir, options, procs, npy_planes(npy_path, *header));
}

Result<DistributedManifest> split_distributed(const std::string& serial_dir, const std::string& dir,
                                              const std::vector<std::string>& stores,
                                              const std::optional<ProcessGrid>& procs, bool verify,
                                              int64_t read_bytes) {
  Result<Grid> src = open_to_split(serial_dir, dir);
  Status opened = src.status();
  if (opened.ok() && verify) opened = src->enable_verification();
  DG_RETURN_IF_ERROR(agree(opened));
  CreateOptions options = grid_options(src->manifest());
  options.stores = stores;
  return make_distributed(dir, options, procs, serial_grid(*src, read_bytes));
}

namespace {

// Writes component `component` of the part's block from the .npy file, some planes at a time.
Status import_block_field(const std::string& npy_path, const NpyHeader& header, Grid& part,
                          const PartInfo& info, int component) {
  const int fd = ::open(npy_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "open", npy_path);
  const internal::PlaneFormat global = internal::plane_format(header.shape, header.dtype, 1);
  const Block& b = info.block;
  const int64_t batch = std::clamp<int64_t>(kFillBatchBytes / static_cast<int64_t>(global.bytes()),
                                            1, b.size(kAxisZ));
  std::vector<std::byte> plane(global.bytes());
  std::vector<std::byte> values(static_cast<size_t>(batch) * global.rect_bytes(b));
  Status st;
  for (int64_t z0 = b[kAxisZ].lo; z0 < b[kAxisZ].hi && st.ok(); z0 += batch) {
    const int64_t n = std::min(batch, b[kAxisZ].hi - z0);
    for (int64_t i = 0; i < n && st.ok(); ++i) {
      st = internal::pread_full(fd, plane.data(), plane.size(),
                                header.data_offset + (z0 + i) * static_cast<int64_t>(plane.size()),
                                npy_path);
      internal::copy_rect(plane.data(), global, b,
                          values.data() + static_cast<size_t>(i) * global.rect_bytes(b),
                          internal::RectCopy::kToPacked);
    }
    const Block at = info.to_local(b);
    Box box;
    box.z = {z0 - info.origin(kAxisZ), n, 1};
    box.y = {at[kAxisY].lo, at.size(kAxisY), 1};
    box.x = {at[kAxisX].lo, at.size(kAxisX), 1};
    box.component = component;
    if (st.ok()) st = write_box(part, box, values.data());
  }
  ::close(fd);
  return st;
}

}  // namespace

Status import_field_distributed(const std::string& npy_path, const std::string& dir,
                                int component) {
  DG_ASSIGN_OR_RETURN(DistributedManifest m, load_distributed(dir));
  auto header = read_npy_header(npy_path);
  DG_RETURN_IF_ERROR(
      agree(header.ok() ? check_npy_fits(*header, npy_path, m.shape, m.dtype) : header.status()));
  if (m.ranks() != size()) {
    return invalid_argument("the grid is split over " + std::to_string(m.ranks()) +
                            " ranks; import a field with 'mpirun -n " + std::to_string(m.ranks()) +
                            "'");
  }
  DG_ASSIGN_OR_RETURN(const std::optional<internal::GridLock> lock, lock_on_root(dir));
  DG_RETURN_IF_ERROR(settle_prepared(m));  // the field goes into the step the parts hold
  Status st = [&]() -> Status {
    DG_ASSIGN_OR_RETURN(Grid part, open_part(m, rank(), Grid::Mode::kReadWrite));
    return import_block_field(npy_path, *header, part, m.parts[static_cast<size_t>(rank())],
                              component);
  }();
  DG_RETURN_IF_ERROR(agree(st));
  m.history.push_back({utc_now(), "import",
                       json{{"from", "npy"},
                            {"file", internal::absolute_path(npy_path)},
                            {"field", m.fields.empty() ? std::string("u")
                                                       : m.fields[static_cast<size_t>(component)]}}
                           .dump()});
  return write_on_root(dir, m);
}

}  // namespace deepgrid::mpi
