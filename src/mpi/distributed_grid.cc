#include "mpi/distributed_grid.h"

#include <fcntl.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "core/file_util.h"
#include "core/process_stats.h"
#include "core/stopwatch.h"
#include "deepgrid/box_io.h"
#include "deepgrid/init.h"
#include "deepgrid/npy.h"
#include "deepgrid/traces_file.h"
#include "mpi/comm.h"
#include "mpi/halo_exchange.h"
#include "plan/plan.h"
#include "run/resident_grid.h"
#include "store/grid_lock.h"
#include "store/plane_rect.h"

namespace deepgrid::mpi {

using nlohmann::json;

namespace {

using internal::seconds_since;

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

std::string new_id() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

// Rank 0's part of create: DIR must be new (or empty) and is made here.
Status make_top_directory(const std::string& dir, bool* made) {
  if (internal::is_directory(dir)) {
    DG_ASSIGN_OR_RETURN(bool empty, internal::directory_is_empty(dir));
    if (!empty) {
      return invalid_argument("directory " + dir +
                              " exists and is not empty; choose a new directory for the grid");
    }
    return Status::Ok();
  }
  const std::string parent = internal::parent_path(dir);
  if (!internal::is_directory(parent)) {
    return invalid_argument("parent directory " + parent + " of " + dir +
                            " does not exist; create it first");
  }
  if (::mkdir(dir.c_str(), 0755) != 0) return errno_status(errno, "create directory", dir);
  *made = true;
  return Status::Ok();
}

// Where a new grid's values come from, filling one block of a part at a time, and what the
// grid's history says about it.
struct BlockSource {
  std::function<Status(Grid& part, const Block& block)> fill;
  std::string command;  // "create", "import", "redistribute"
  json details;
  int64_t step = 0;  // the time step of the values
};

// Fills a new part (the block, no halos) plane by plane: produce(z, values) writes the block's
// x-y rectangle of global plane z, packed (which is the part's plane).
Status write_block(Grid& part, const Block& block,
                   const std::function<Status(int64_t, std::byte*)>& produce) {
  std::vector<std::byte> values(internal::plane_format(part.manifest()).rect_bytes(block));
  for (int64_t z = block[kAxisZ].lo; z < block[kAxisZ].hi; ++z) {
    DG_RETURN_IF_ERROR(produce(z, values.data()));
    DG_RETURN_IF_ERROR(part.write_planes(z - block[kAxisZ].lo, 1, values.data()));
  }
  return Status::Ok();
}

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

Status commit_with_history(Grid& grid, int64_t step, const std::string& command,
                           const json& details) {
  Manifest m = grid.manifest();
  m.step = step;
  if (!command.empty()) m.history.push_back({utc_now(), command, details.dump()});
  return grid.commit(m);
}

// What a part of the grid `global` describes is created with: its held points, the grid's
// fields (zeros: the part's values are written afterwards) and scheme, its stores.
CreateOptions part_options(const CreateOptions& global, const PartInfo& info) {
  CreateOptions opt;
  opt.shape = info.shape();
  opt.dtype = global.dtype;
  for (const FieldInit& f : global.fields) opt.fields.push_back({f.name, {}});
  opt.scheme = global.scheme;
  opt.stores = info.stores;
  return opt;
}

// The options a grid like `m` was created with (fields without their initial values).
CreateOptions grid_options(const DistributedManifest& m) {
  CreateOptions opt;
  opt.shape = m.shape;
  opt.dtype = m.dtype;
  for (const std::string& f : m.fields) opt.fields.push_back({f, {}});
  opt.scheme = m.scheme;
  return opt;
}

// This rank's part of a new grid, with its block's values.
Result<PartInfo> create_part(const std::string& dir, const std::string& id,
                             const CreateOptions& global, const BlockSource& source,
                             const Block& block) {
  PartInfo info;
  info.block = block;
  info.stores = expand_rank(global.stores, rank());
  for (std::string& s : info.stores) s = internal::absolute_path(s);
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

json part_json(const PartInfo& p) {
  return {{"dir", p.dir}, {"stores", p.stores}, {"below", p.halo.below}, {"above", p.halo.above}};
}

// Every rank's view of its own part, shared: the parts' directories and halos.
void share_parts(DistributedManifest* m, const PartInfo& mine) {
  const std::vector<std::string> all = all_gather(part_json(mine).dump());
  for (size_t r = 0; r < all.size(); ++r) {
    const json j = json::parse(all[r]);
    PartInfo& p = m->parts[r];
    p.dir = j.at("dir").get<std::string>();
    p.stores = j.at("stores").get<std::vector<std::string>>();
    p.halo = {j.at("below").get<std::array<int64_t, 3>>(),
              j.at("above").get<std::array<int64_t, 3>>()};
  }
}

// How the grid's global planes (and its blocks' packed rectangles) hold their values.
internal::PlaneFormat global_format(const DistributedManifest& m) {
  return internal::plane_format(m.shape, m.dtype, m.components());
}

Status write_on_root(const std::string& dir, const DistributedManifest& m) {
  return agree(rank() == 0 ? write_distributed_manifest(dir, m) : Status::Ok());
}

}  // namespace

namespace {

// The process grid given (checked against the shape and this job), or the one chosen.
Result<ProcessGrid> process_grid_for(const Shape& shape, const std::optional<ProcessGrid>& given) {
  if (!given) return choose_process_grid(shape, size());
  DG_RETURN_IF_ERROR(check_process_grid(*given, shape, size()));
  return *given;
}

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

namespace {

// Holds DIR's lock on rank 0 while a command changes the grid (the parts have their own): a
// second writer is refused before anything changes. Collective.
Result<std::optional<internal::GridLock>> lock_on_root(const std::string& dir) {
  std::optional<internal::GridLock> lock;
  Status locked;
  if (rank() == 0) {
    auto held = internal::GridLock::acquire(dir, internal::GridLock::Kind::kExclusive);
    locked = held.status();
    if (held.ok()) lock.emplace(std::move(held).value());
  }
  DG_RETURN_IF_ERROR(agree(locked));
  return lock;
}

// Writes component `component` of the part's block from the .npy file, some planes at a time.
Status import_block_field(const std::string& npy_path, const NpyHeader& header, Grid& part,
                          const PartInfo& info, int component) {
  const int fd = ::open(npy_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "open", npy_path);
  const internal::PlaneFormat global = internal::plane_format(header.shape, header.dtype, 1);
  const Block& b = info.block;
  const int64_t batch =
      std::clamp<int64_t>((64 << 20) / static_cast<int64_t>(global.bytes()), 1, b.size(kAxisZ));
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

// A run whose parts stay in memory (ResidentGrid) prepares every part's new state beside its
// files (Grid::prepare_replacement), agrees, and only then commits them. So a run stopped
// between the two leaves every part prepared for, or committed at, its last step t, and one
// stopped earlier leaves at least one part with nothing prepared, none committed. Collective:
// in the first case the prepared parts commit, in the second they discard what they prepared.
// With another number of ranks than parts nothing is done: open_part then refuses parts that
// do not hold the grid's step, with the hint to finish the run.
Status settle_prepared(const DistributedManifest& m) {
  if (size() != m.ranks()) return Status::Ok();
  auto part = open_part_as_is(m, rank(), Grid::Mode::kReadWrite);
  DG_RETURN_IF_ERROR(agree(part.status()));
  const int64_t prepared = part->prepared() ? part->prepared()->step : -1;
  int64_t t = -1;
  bool forward = true;
  std::vector<std::array<int64_t, 2>> all;
  for (const std::string& text : all_gather(json({part->manifest().step, prepared}).dump())) {
    all.push_back(json::parse(text).get<std::array<int64_t, 2>>());
    t = std::max(t, all.back()[1]);
  }
  if (t < 0) return Status::Ok();
  for (const auto& [step, ready] : all) forward = forward && (ready == t || step == t);
  Status st;
  if (prepared >= 0) st = forward ? part->commit_prepared() : part->discard_prepared();
  return agree(st);
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

Result<DistributedManifest> load_distributed(const std::string& dir) {
  std::string text;
  Status st;
  if (rank() == 0) {
    auto m = read_distributed_manifest(dir);  // checks it, with a message naming the file
    st = m.status();
    if (m.ok()) text = m->to_json();
  }
  DG_RETURN_IF_ERROR(agree(st));
  DG_ASSIGN_OR_RETURN(DistributedManifest m, DistributedManifest::from_json(broadcast(text)));
  m.dir = dir;
  return m;
}

namespace {

// A plane message to rank 0: an error code (0: values follow), then the block's x-y rectangle
// of one plane, or the error's message.
constexpr int kPlaneTag = 7;

void send_blocks_to_root(const DistributedManifest& m, bool verify) {
  const PartInfo& info = m.parts[static_cast<size_t>(rank())];
  std::vector<std::byte> msg(sizeof(int64_t) + global_format(m).rect_bytes(info.block));
  Status st = [&]() -> Status {
    DG_ASSIGN_OR_RETURN(Grid part, open_part(m, rank(), Grid::Mode::kReadOnly));
    if (verify) DG_RETURN_IF_ERROR(part.enable_verification());
    return read_block_planes(part, info, [&](int64_t, const std::byte* values) {
      std::memcpy(msg.data() + sizeof(int64_t), values, msg.size() - sizeof(int64_t));
      send(msg.data(), msg.size(), 0, kPlaneTag);
      return Status::Ok();
    });
  }();
  if (st.ok()) return;
  // The error ends this rank's stream; rank 0 shares it through agree().
  std::string err(sizeof(int64_t), '\0');
  const int64_t code = static_cast<int64_t>(st.code());
  std::memcpy(err.data(), &code, sizeof code);
  err += st.message();
  send(err.data(), err.size(), 0, kPlaneTag);
}

// Rank 0 takes rank r's rectangle of the next plane into `values`, or its error.
Status receive_block_plane(int r, std::vector<std::byte>* msg, std::byte* values) {
  receive(r, kPlaneTag, msg);
  int64_t code = 0;
  std::memcpy(&code, msg->data(), sizeof code);
  if (code != 0) {
    return Status(static_cast<ErrorCode>(code),
                  "rank " + std::to_string(r) + ": " +
                      std::string(reinterpret_cast<const char*>(msg->data()) + sizeof code,
                                  msg->size() - sizeof code));
  }
  std::memcpy(values, msg->data() + sizeof code, msg->size() - sizeof code);
  return Status::Ok();
}

// Rank 0 assembles every global plane from the ranks' rectangles (its own read from its part),
// z-layer of blocks after z-layer; after an error it still drains the other ranks' messages.
Status assemble_planes_on_root(const DistributedManifest& m, bool verify,
                               const io::PlaneConsumer& consume) {
  const internal::PlaneFormat format = global_format(m);
  std::vector<std::byte> global(format.bytes());
  std::vector<std::byte> plane, msg, values;
  std::vector<bool> failed(static_cast<size_t>(m.ranks()), false);
  Status first;
  auto own = open_part(m, 0, Grid::Mode::kReadOnly);
  if (own.ok() && verify) first = own->enable_verification();
  if (!own.ok()) first = own.status(), failed[0] = true;
  const int layer = m.procs.p[0] * m.procs.p[1];
  for (int lo = 0; lo < m.ranks(); lo += layer) {
    const Span zs = m.parts[static_cast<size_t>(lo)].block[kAxisZ];
    for (int64_t z = zs.lo; z < zs.hi; ++z) {
      for (int r = lo; r < lo + layer; ++r) {
        if (failed[static_cast<size_t>(r)]) continue;
        const PartInfo& info = m.parts[static_cast<size_t>(r)];
        values.resize(format.rect_bytes(info.block));
        const Status got = r == 0 ? read_rect(*own, z - info.origin(kAxisZ),
                                              info.to_local(info.block), &plane, values.data())
                                  : receive_block_plane(r, &msg, values.data());
        if (!got.ok()) {
          failed[static_cast<size_t>(r)] = true;
          if (first.ok()) first = got;
          continue;
        }
        internal::copy_rect(global.data(), format, info.block, values.data(),
                            internal::RectCopy::kFromPacked);
      }
      if (first.ok()) first = consume(z, global.data());
    }
  }
  return first;
}

}  // namespace

Status gather_planes(const DistributedManifest& m, bool verify, const io::PlaneConsumer& consume) {
  if (m.ranks() != size()) {  // rank 0 reads every part itself
    return agree(rank() == 0 ? read_distributed_planes(m, verify, consume) : Status::Ok());
  }
  if (rank() != 0) {
    send_blocks_to_root(m, verify);
    return agree(Status::Ok());
  }
  return agree(assemble_planes_on_root(m, verify, consume));
}

std::vector<std::string> describe_parts(const DistributedManifest& m) {
  if (m.ranks() != size()) {
    std::vector<std::string> out;
    if (rank() == 0) {
      for (int r = 0; r < m.ranks(); ++r) out.push_back(describe_part(m, r));
    }
    return out;
  }
  return all_gather(describe_part(m, rank()));
}

namespace {

// Reach of the stencil along each axis (x, y, z).
std::array<int64_t, 3> radii(const Scheme& scheme) {
  return {scheme.radius_x(), scheme.radius_y(), scheme.radius_z()};
}

// Steps between halo exchanges when --bt is not given: the halo (k * r points each side) stays
// within an eighth of the thinnest block along every split axis the stencil reaches (every
// such axis when none is split), as redundant work on the halos grows with it, and at most 64
// (as the stream engine's sweeps).
int exchange_depth(const DistributedManifest& m, const RunOptions& opt) {
  if (opt.bt > 0) return opt.bt;
  const std::array<int64_t, 3> r = radii(opt.scheme);
  const bool any_split = m.procs.ranks() > 1;
  int64_t depth = 64;
  bool reaches = false;
  for (int a = 0; a < 3; ++a) {
    const size_t i = static_cast<size_t>(a);
    if (r[i] == 0 || (any_split && m.procs.p[i] == 1)) continue;
    int64_t thinnest = INT64_MAX;
    for (const PartInfo& p : m.parts) thinnest = std::min(thinnest, p.block.size(a));
    depth = std::min(depth, thinnest / (8 * r[i]));
    reaches = true;
  }
  if (!reaches) return static_cast<int>(std::clamp<int64_t>(opt.steps, 1, 64));
  return static_cast<int>(std::max<int64_t>(depth, 1));
}

// A part about to be copied (laid out again, or split over another process grid) is checked
// against its checksums as it is read, since the copy gets new ones: always when it has them,
// and with `verify` (--verify) a part without them is refused.
Status check_what_is_copied(Grid& part, bool verify) {
  if (verify) return part.enable_verification();
  part.verify_if_recorded();
  return Status::Ok();
}

// Whether halo `to` differs from `from` only in wider z halos: planes the part can gain at its
// ends in place (Grid::add_planes), its block staying where it is on disk.
bool only_z_halos_grow(const HaloExtent& from, const HaloExtent& to) {
  for (size_t a : {size_t{kAxisX}, size_t{kAxisY}}) {
    if (to.below[a] != from.below[a] || to.above[a] != from.above[a]) return false;
  }
  constexpr size_t z = kAxisZ;
  return to.below[z] >= from.below[z] && to.above[z] >= from.above[z];
}

// Gives this rank's part the wider z halo `need` by adding planes at its ends, when its
// planes can stay where they are (Grid::add_planes); false when it must be copied instead.
// Nothing is copied, so nothing is checked: the block keeps its checksums.
Result<bool> add_halo_planes(const DistributedManifest& m, PartInfo* info, const HaloExtent& need) {
  if (!only_z_halos_grow(info->halo, need)) return false;
  DG_ASSIGN_OR_RETURN(Grid part, open_part(m, rank(), Grid::Mode::kReadWrite));
  if (!part.can_grow_spare() || part.prepared().has_value()) return false;
  constexpr size_t z = kAxisZ;
  DG_RETURN_IF_ERROR(
      part.add_planes(need.below[z] - info->halo.below[z], need.above[z] - info->halo.above[z]));
  DG_RETURN_IF_ERROR(commit_with_history(part, m.step, "relayout",
                                         {{"halo_below", need.below}, {"halo_above", need.above}}));
  info->halo = need;
  return true;
}

// Gives this rank's part the halo `need`: in place when only its z halos grow
// (add_halo_planes), else rewritten (its block's values copied and checked,
// check_what_is_copied) in place of the old one: a new part beside it, then the old one
// removed and the new one renamed over it.
Status relayout_part(const DistributedManifest& m, PartInfo* info, const HaloExtent& need,
                     bool verify) {
  const std::string fresh_dir = info->dir + ".new";
  if (internal::is_directory(fresh_dir)) {
    return corrupt(fresh_dir + " is left from an interrupted re-layout of part " +
                   std::to_string(rank()) + " (the part in " + info->dir +
                   " is intact); remove it and run again");
  }
  DG_ASSIGN_OR_RETURN(const bool added, add_halo_planes(m, info, need));
  if (added) return Status::Ok();
  PartInfo fresh_info = *info;
  fresh_info.halo = need;
  const CreateOptions opt = part_options(grid_options(m), fresh_info);
  const Status copied = [&]() -> Status {
    DG_ASSIGN_OR_RETURN(Grid fresh, Grid::create(fresh_dir, opt));
    DG_ASSIGN_OR_RETURN(Grid old, open_part(m, rank(), Grid::Mode::kReadOnly));
    DG_RETURN_IF_ERROR(check_what_is_copied(old, verify));
    const internal::PlaneFormat format = internal::plane_format(fresh.manifest());
    std::vector<std::byte> plane(format.bytes());
    const Block at = fresh_info.to_local(info->block);
    DG_RETURN_IF_ERROR(read_block_planes(old, *info, [&](int64_t z, const std::byte* values) {
      // copy_rect only reads the packed values in this direction.
      internal::copy_rect(plane.data(), format, at, const_cast<std::byte*>(values),
                          internal::RectCopy::kFromPacked);
      return fresh.write_planes(z - fresh_info.origin(kAxisZ), 1, plane.data());
    }));
    return commit_with_history(fresh, m.step, "relayout",
                               {{"halo_below", need.below}, {"halo_above", need.above}});
  }();
  if (!copied.ok()) {
    if (internal::is_directory(fresh_dir)) (void)remove_part(fresh_dir);
    return copied;
  }
  DG_RETURN_IF_ERROR(remove_part(info->dir));
  if (::rename(fresh_dir.c_str(), info->dir.c_str()) != 0) {
    return errno_status(errno, "rename", fresh_dir);
  }
  *info = fresh_info;
  return Status::Ok();
}

// The halo, `halo` points each side along each axis, of k steps of the run's scheme.
std::array<int64_t, 3> halo_of_depth(const Scheme& scheme, int k) {
  std::array<int64_t, 3> halo = radii(scheme);
  for (int64_t& h : halo) h *= k;
  return halo;
}

// The halo points each side along each axis that exchanges of depth k bring to the parts of
// process grid `procs`, for reports: k * r along the axes it splits, none along the others.
std::array<int64_t, 3> exchanged_halo(const Scheme& scheme, int k, const ProcessGrid& procs) {
  std::array<int64_t, 3> halo = halo_of_depth(scheme, k);
  for (size_t a = 0; a < 3; ++a) {
    if (procs.p[a] == 1) halo[a] = 0;
  }
  return halo;
}

// The halo the part `p` has in a run whose exchanges bring `halo` points (fit_halos lays it
// out again when it changes): its own when that suffices; else its own with z halos widened to
// what is needed, when that suffices (the part can gain those planes in place); else what it
// needs.
HaloExtent fitted_halo(const PartInfo& p, const Shape& shape, const std::array<int64_t, 3>& halo,
                       bool periodic) {
  const HaloExtent need = needed_halo(p.block, shape, halo, periodic);
  if (halo_suffices(p.halo, need, p.block, shape, periodic)) return p.halo;
  HaloExtent widened = p.halo;
  constexpr size_t z = kAxisZ;
  widened.below[z] = std::max(widened.below[z], need.below[z]);
  widened.above[z] = std::max(widened.above[z], need.above[z]);
  return halo_suffices(widened, need, p.block, shape, periodic) ? widened : need;
}

// Makes every part's halo fit k steps (`verify`: relayout_part's), sharing the result in the
// manifest on disk. When some
// rank fails, the parts laid out again on the others are recorded all the same, so that the
// manifest keeps describing every part.
Status fit_halos(const std::string& dir, DistributedManifest* m, const std::array<int64_t, 3>& halo,
                 bool periodic, bool verify) {
  PartInfo mine = m->parts[static_cast<size_t>(rank())];
  const HaloExtent need = fitted_halo(mine, m->shape, halo, periodic);
  const Status laid_out =
      agree(need == mine.halo ? Status::Ok() : relayout_part(*m, &mine, need, verify));
  int changed = mine.halo == m->parts[static_cast<size_t>(rank())].halo ? 0 : 1;
  MPI_Allreduce(MPI_IN_PLACE, &changed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (changed != 0) {
    share_parts(m, mine);
    DG_RETURN_IF_ERROR(write_on_root(dir, *m));
  }
  return laid_out;
}

}  // namespace

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankFigures, rank, method, engine_bt, part_planes, seconds,
                                   compute_seconds, io_wait_seconds, exchange_seconds, wait_seconds,
                                   bytes_read, bytes_written, bytes_sent, engine_memory, host,
                                   stolen_cpu_seconds, cpus, io_backend, threads)

std::string RankFigures::to_json() const { return json(*this).dump(); }

RankFigures RankFigures::from_json(const std::string& text) {
  return json::parse(text).get<RankFigures>();
}

void record_machines_steal(const std::vector<RankFigures>& per_rank, RunReport* total) {
  std::map<std::string, const RankFigures*> machines;  // each host's largest figure
  for (const RankFigures& f : per_rank) {
    const RankFigures*& m = machines[f.host];
    if (m == nullptr || f.stolen_cpu_seconds > m->stolen_cpu_seconds) m = &f;
  }
  total->stolen_cpu_seconds = 0;
  total->cpus = 0;
  for (const auto& [host, f] : machines) {
    total->stolen_cpu_seconds += f->stolen_cpu_seconds;
    total->cpus += f->cpus;
  }
}

std::string DistributedRunReport::to_json() const {
  json j = json::parse(total.to_json());
  j["ranks"] = ranks;
  j["exchange_bt"] = exchange_bt;
  j["process_grid"] = process_grid;
  j["halo"] = halo;
  j["halo_planes"] = halo[kAxisZ];
  double exchange = 0, wait = 0;
  uint64_t sent = 0;
  json per = json::array();
  for (const RankFigures& f : per_rank) {
    per.push_back(json::parse(f.to_json()));
    exchange += f.exchange_seconds;
    wait += f.wait_seconds;
    sent += f.bytes_sent;
  }
  j["exchange_seconds"] = exchange;  // summed over ranks, like compute_seconds
  j["wait_seconds"] = wait;
  j["bytes_sent"] = sent;
  j["per_rank"] = std::move(per);
  return j.dump();
}

std::string DistributedRunReport::to_text() const {
  std::string out = total.to_text();
  char line[256];
  if (ranks == 1) {
    std::snprintf(line, sizeof line, "ranks       1 (process grid %s): one part, no halos\n",
                  process_grid.c_str());
  } else {
    std::snprintf(line, sizeof line,
                  "ranks       %d (process grid %s), halo exchange every %d steps (halos of %lld, "
                  "%lld, %lld points along x, y, z)\n",
                  ranks, process_grid.c_str(), exchange_bt, static_cast<long long>(halo[0]),
                  static_cast<long long>(halo[1]), static_cast<long long>(halo[2]));
  }
  out += line;
  // Ranks on several machines: which, with what each one's hypervisor took.
  const bool hosts = std::any_of(per_rank.begin(), per_rank.end(), [&](const RankFigures& f) {
    return f.host != per_rank.front().host;
  });
  out += "rank  method  planes  seconds  compute  disk-wait  exchange  waiting  read      written";
  out += hosts ? "   stolen  host\n" : "\n";
  for (const RankFigures& f : per_rank) {
    std::snprintf(
        line, sizeof line, "%4d  %-6s  %6lld  %7.3f  %7.3f  %9.3f  %8.3f  %7.3f  %-8s  %-*s",
        f.rank, f.method.c_str(), static_cast<long long>(f.part_planes), f.seconds,
        f.compute_seconds, f.io_wait_seconds, f.exchange_seconds, f.wait_seconds,
        format_size(f.bytes_read).c_str(), hosts ? 8 : 0, format_size(f.bytes_written).c_str());
    out += line;
    if (hosts) {
      std::snprintf(line, sizeof line, " %7.3f  %s", f.stolen_cpu_seconds, f.host.c_str());
      out += line;
    }
    out += "\n";
  }
  return out;
}

namespace {

// The block's values read from the parts of an older decomposition of the same grid: for each
// plane, the rectangle where the block meets each old block (checked, check_what_is_copied).
BlockSource old_parts(const DistributedManifest& old, bool verify) {
  BlockSource source;
  source.command = "redistribute";
  source.details = {{"from_ranks", old.ranks()}, {"from_process_grid", old.procs.to_string()}};
  source.step = old.step;
  source.fill = [&old, verify](Grid& part, const Block& block) -> Status {
    std::vector<int> from;
    std::vector<Grid> opened;
    for (int o = 0; o < old.ranks(); ++o) {
      if (intersect(block, old.parts[static_cast<size_t>(o)].block).empty()) continue;
      DG_ASSIGN_OR_RETURN(Grid g, open_part(old, o, Grid::Mode::kReadOnly));
      DG_RETURN_IF_ERROR(check_what_is_copied(g, verify));
      from.push_back(o);
      opened.push_back(std::move(g));
    }
    const internal::PlaneFormat format = global_format(old);
    // The block's packed values: a plane of the block's extents.
    const internal::PlaneFormat packed_block = {block.size(kAxisX), block.size(kAxisY),
                                                format.components, format.value_bytes};
    std::vector<std::byte> plane, values;
    return write_block(part, block, [&](int64_t z, std::byte* out) -> Status {
      for (size_t i = 0; i < from.size(); ++i) {
        const PartInfo& info = old.parts[static_cast<size_t>(from[i])];
        const Block meet = intersect(block, info.block);
        if (z < meet[kAxisZ].lo || z >= meet[kAxisZ].hi) continue;
        values.resize(format.rect_bytes(meet));
        DG_RETURN_IF_ERROR(read_rect(opened[i], z - info.origin(kAxisZ), info.to_local(meet),
                                     &plane, values.data()));
        PartInfo in_block;  // the block's own coordinates: a part of the block alone
        in_block.block = block;
        internal::copy_rect(out, packed_block, in_block.to_local(meet), values.data(),
                            internal::RectCopy::kFromPacked);
      }
      return Status::Ok();
    });
  };
  return source;
}

// `m` split over the process grid `procs`: itself when it is split so already, else new parts
// (blocks only, no halos nor directories yet: redistribute() makes them).
DistributedManifest split_as(const DistributedManifest& m, const ProcessGrid& procs) {
  if (m.procs == procs) return m;
  const std::vector<Block> blocks = decompose(m.shape, procs);
  DistributedManifest next = m;
  next.procs = procs;
  next.parts.assign(blocks.size(), {});
  for (size_t r = 0; r < blocks.size(); ++r) next.parts[r].block = blocks[r];
  return next;
}

// The process grid a run uses: the one given, else the grid's own when the job has as many
// ranks, else the one chosen for this job.
Result<ProcessGrid> run_process_grid(const DistributedManifest& m,
                                     const std::optional<ProcessGrid>& given) {
  if (!given && m.ranks() == size()) return m.procs;
  return process_grid_for(m.shape, given);
}

// A grid split over another process grid than this run's is split again: new parts (under a
// new id, beside the old ones) are filled from the old parts, which every rank must be able to
// read (one machine, or a shared filesystem); then the manifest naming the new parts is
// committed and the old parts are removed. New rank r keeps its part in the stores of old rank
// r mod (old ranks).
Status redistribute(const std::string& dir, DistributedManifest* m, const ProcessGrid& procs,
                    bool verify) {
  if (m->procs == procs) return Status::Ok();
  const DistributedManifest old = *m;
  DistributedManifest next = split_as(old, procs);
  next.id = broadcast(rank() == 0 ? new_id() : std::string());
  CreateOptions options = grid_options(old);
  options.stores = old.parts[static_cast<size_t>(rank() % old.ranks())].stores;
  auto part = create_part(dir, next.id, options, old_parts(old, verify),
                          next.parts[static_cast<size_t>(rank())].block);
  Status st = agree(part.status());
  if (st.ok()) {
    share_parts(&next, *part);
    next.history.push_back({utc_now(), "redistribute",
                            json{{"from_ranks", old.ranks()},
                                 {"to_ranks", size()},
                                 {"from_process_grid", old.procs.to_string()},
                                 {"to_process_grid", procs.to_string()}}
                                .dump()});
    st = write_on_root(dir, next);
  }
  if (!st.ok()) {  // the old parts still hold the grid
    if (part.ok()) (void)remove_part(part->dir);
    return st;
  }
  *m = next;
  Status removed;
  for (int o = rank(); o < old.ranks(); o += size()) {
    const Status gone = remove_part(old.parts[static_cast<size_t>(o)].dir);
    if (removed.ok() && !gone.ok()) {
      removed = Status(gone.code(), "the grid was redistributed, but its old part " +
                                        std::to_string(o) + " could not be removed (" +
                                        gone.message() + "); remove it by hand");
    }
  }
  return agree(removed);
}

// This rank's share of a run's probes, and what its receivers record.
struct PartProbes {
  ResolvedProbes resolved;         // in the part's coordinates
  Traces traces;                   // its receivers' values, one round's held
  std::vector<int64_t> receivers;  // each one's index among the run's receivers
};

// Where a streamed part keeps its receivers' values while a round is under way (saved after
// every pass of its engine), so that a run resumed after a stop in the middle of a round has
// the values of the steps the part does not redo. (Parts in memory redo a stopped round
// whole: rank 0's traces file has every round before.)
constexpr const char* kPartTracesName = "traces.part.npy";

std::string part_traces_path(const Grid& part) {
  return internal::join_path(part.dir(), kPartTracesName);
}

// The part's share of the probes of `run` (its receivers record steps step_from + 1 ..
// step_to), holding `rows` steps from `from` + 1 on, with the values its traces file saved
// when `resumed`. The caller points resolved.traces at the result's traces (they move with
// it).
PartProbes part_share(const ResolvedProbes& all, const PartInfo& info, const DistributedManifest& m,
                      const RunOptions& opt, const RunRecord& run, int64_t from, int64_t rows,
                      const Grid* resumed) {
  PartProbes out;
  out.resolved = part_probes(all, info, m.shape, opt.boundary.kind == Boundary::Kind::kPeriodic,
                             &out.receivers);
  out.traces = run_traces(run.step_from, run.step_to, static_cast<int64_t>(out.receivers.size()),
                          rows, from + 1);
  if (resumed != nullptr) load_held_rows(&out.traces, part_traces_path(*resumed));
  return out;
}

// Rank 0 gathers what every part's receivers recorded at steps (from, to] (each receiver's
// index, then its values) into `whole` (NaN where a part has none) and writes it to `path`, as
// a serial run does after every pass; then every rank holds the steps from `to` + 1 on.
// Only those steps travel: gathering every step after every round made a 4000-step run with
// 2048 receivers take minutes. Both windows must hold steps (from, to]. Collective.
Status write_traces_on_root(PartProbes* mine, Traces* whole, const std::string& path, int64_t from,
                            int64_t to) {
  Traces& t = mine->traces;
  // The steps sent, [step0, step1): the same on every rank.
  const int64_t step0 = std::max(from + 1, t.first_step);
  const int64_t step1 = std::max(step0, std::min(to + 1, t.first_step + t.steps));
  auto check_held = [step0, step1](const Traces& held) {
    if (step1 > step0 && (!held.holds(step0) || !held.holds(step1 - 1))) {
      std::fputs("deepgrid: internal error: receivers' values of a round were not held\n", stderr);
      std::abort();
    }
  };
  check_held(t);
  const int64_t row0 = step0 - t.held_from, row1 = step1 - t.held_from;
  std::string packed;
  auto put = [&packed](const auto& v) {
    packed.append(reinterpret_cast<const char*>(&v), sizeof v);
  };
  for (size_t j = 0; j < mine->receivers.size(); ++j) {
    put(mine->receivers[j]);
    for (int64_t s = row0; s < row1; ++s) put(t.values[static_cast<size_t>(s * t.receivers) + j]);
  }
  const std::vector<std::string> parts = gather(packed);
  hold_from(&t, to + 1);
  if (rank() != 0) return agree(Status::Ok());
  check_held(*whole);
  for (const std::string& p : parts) {
    const char* at = p.data();
    for (const char* end = at + p.size(); at < end;) {
      int64_t r = 0;
      std::memcpy(&r, at, sizeof r);
      at += sizeof r;
      for (int64_t s = step0; s < step1; ++s, at += sizeof(double)) {
        double v = 0;
        std::memcpy(&v, at, sizeof v);
        const int64_t row = s - whole->held_from;
        double& kept = whole->values[static_cast<size_t>(row * whole->receivers + r)];
        // Only what changed, so that the file is rewritten where it changed (write_traces_npy).
        if (!std::isnan(v) && std::memcmp(&kept, &v, sizeof v) != 0) {
          kept = v;
          whole->changed[static_cast<size_t>(row)].store(true, std::memory_order_relaxed);
        }
      }
    }
  }
  const Status saved = write_traces_npy(*whole, path);
  if (saved.ok()) hold_from(whole, to + 1);
  return agree(saved);
}

// How many of the run's receivers lie in `block`.
int64_t receivers_in(const ResolvedProbes& all, const Block& block) {
  return std::count_if(all.receivers.begin(), all.receivers.end(),
                       [&block](const ProbePoint& q) { return block.contains(q.x, q.y, q.z); });
}

// The receivers' values of one round (at most `rows` steps) stay in memory, within --mem:
// each rank holds its part's, and rank 0 the whole grid's as well. Takes them from `opt`'s
// budget, which the parts' engines and the halo exchange then share; a budget they fill on any
// rank is refused. Checked before anything is laid out again (for the grid `m` as the run
// splits it, `next`, and, resuming, as it is, whose parts finish their round first), so that
// a refusal changes nothing. Collective.
Status leave_room_for_traces(const DistributedManifest& m, const DistributedManifest& next,
                             const ResolvedProbes& all, int64_t rows, bool resumed,
                             RunOptions* opt) {
  int64_t mine = receivers_in(all, next.parts[static_cast<size_t>(rank())].block);
  if (resumed && m.ranks() == size()) {
    mine = std::max(mine, receivers_in(all, m.parts[static_cast<size_t>(rank())].block));
  }
  const int64_t whole = rank() == 0 ? static_cast<int64_t>(all.receivers.size()) : 0;
  auto left = budget_beside_traces(opt->mem_budget, rows, whole + mine,
                                   whole > 0 ? "the whole grid's and this rank's part's" : "");
  DG_RETURN_IF_ERROR(agree(left.status()));
  opt->mem_budget = *left;
  return Status::Ok();
}

// Adds one advance of the part to the rank's figures.
void add_advance(RankFigures* f, const RunReport& r) {
  f->method = r.method;
  f->threads = r.threads;
  f->engine_bt = r.bt;
  if (!r.io_backend.empty()) f->io_backend = r.io_backend;
  f->compute_seconds += r.compute_seconds;
  f->io_wait_seconds += r.io_wait_seconds;
  f->bytes_read += r.bytes_read;
  f->bytes_written += r.bytes_written;
  f->engine_memory = std::max(f->engine_memory, r.engine_memory);
}

void add_exchange(RankFigures* f, const ExchangeStats& e) {
  f->exchange_seconds += e.seconds;
  f->bytes_read += e.bytes_read;
  f->bytes_written += e.bytes_written;
  f->bytes_sent += e.bytes_sent;
}

// Commits the state of every part held in memory at `step` at once (settle_prepared): each
// writes and prepares its new state, and once all have, commits it. (Rank 0 saved the
// receivers' values of every round before.) Collective.
Status commit_held(Grid& part, const ResidentGrid& held, int64_t step, RankFigures* figures) {
  const auto t0 = std::chrono::steady_clock::now();
  Manifest after = part.manifest();
  after.step = step;
  Status st = held.write_replacement(part);
  if (st.ok()) st = part.prepare_replacement(after);
  figures->bytes_written += held.grid_bytes();
  figures->io_wait_seconds += seconds_since(t0);
  if (const Status all = agree(st); !all.ok()) {
    if (part.prepared()) (void)part.discard_prepared();
    return all;
  }
  const auto t1 = std::chrono::steady_clock::now();
  st = part.commit_prepared();
  figures->io_wait_seconds += seconds_since(t1);
  return agree(st);
}

// Whether a run whose parts stay in memory commits them now (RunOptions::checkpoint_seconds),
// `since` seconds after the last commit, which took `last` seconds (at first, the load). The
// automatic rule waits at least a minute: the load only reads, while a commit writes and
// syncs every part (about 5 times the load on the development VM), so that the first
// checkpoint of a short run would otherwise cost more than the tenth it aims at.
bool checkpoint_due(double every, double since, double last) {
  constexpr double kWorkPerCheckpoint = 10, kLeastSeconds = 60;
  return since >= (every >= 0 ? every : std::max(kLeastSeconds, kWorkPerCheckpoint * last));
}

// The part of this rank in memory for the rounds of `run` from `step`, each round taking at
// most opt.steps steps, when every rank's part fits its budget in memory (the in-core method);
// else none, and every round goes through the parts' files. Collective. The load counts in
// `figures` as disk traffic and time.
Result<std::optional<ResidentGrid>> hold_in_memory(Grid& part, const RunOptions& opt,
                                                   const RunRecord& run, int64_t step,
                                                   RankFigures* figures) {
  if (step >= run.step_to) return std::optional<ResidentGrid>();
  auto plan = plan_run(part, opt, opt.machine);
  DG_RETURN_IF_ERROR(agree(plan.status()));
  if (any_rank(plan->method != Method::kInCore)) return std::optional<ResidentGrid>();
  auto checked = prepare_run(part, opt);
  DG_RETURN_IF_ERROR(agree(checked.status()));
  const auto t0 = std::chrono::steady_clock::now();
  auto held = ResidentGrid::load(part, opt, std::move(checked).value());
  figures->io_wait_seconds += seconds_since(t0);
  DG_RETURN_IF_ERROR(agree(held.status()));
  figures->bytes_read += held->grid_bytes();
  return std::optional<ResidentGrid>(std::move(held).value());
}

// A run stopped part-way, and how the next run goes on.
//
// A run records its range in DIR/run.json (rank 0; resume.h's RunRecord) before its first
// round, and each part records the round it is in (its own run.json, run.h's record_run) once
// the round's halos are in place and committed on every rank. So a run stopped at any moment
// leaves either every part at the round's first step s (some part had not recorded the round:
// then none went past s, and the exchange is done again), or, once all had, each part at s,
// part-way through the round, or at its end t, holding all it needs to reach t alone (its
// halos hold step s). The next run first takes every part to t, then goes on from there.

// Where a part stands: its committed step, the end of the round it recorded and has not
// finished (its step when none), the start of the round it is in or just finished (its
// step when none), whether an in-place sweep was cut in its middle.
struct PartProgress {
  int64_t step = 0;
  int64_t target = 0;
  int64_t round_from = 0;
  bool mid_sweep = false;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PartProgress, step, target, round_from, mid_sweep)

PartProgress progress_of(const Grid& part) {
  PartProgress p;
  p.step = p.target = p.round_from = part.manifest().step;
  if (const std::optional<RunRecord> r = current_run(part)) {
    p.target = r->step_to;
    p.round_from = r->step_from;
  }
  p.mid_sweep = !part.interrupted_sweep().empty();
  return p;
}

// The step every part holds (`at`), or, when a round was cut short, the step it is to reach;
// where the parts' last rounds began (`round_from`: the receivers' values of the steps after
// it may be in the streamed parts' files only).
struct GridProgress {
  int64_t at = 0;
  bool mid_round = false;
  int64_t from = 0;  // the least advanced part's step
  int64_t round_from = 0;
};

// Collective. With another number of ranks than parts nothing is read here: open_part then
// refuses parts that do not hold the grid's step.
Result<GridProgress> grid_progress(const DistributedManifest& m) {
  if (size() != m.ranks()) return GridProgress{m.step, false, m.step, m.step};
  auto part = open_part_as_is(m, rank(), Grid::Mode::kReadOnly);
  DG_RETURN_IF_ERROR(agree(part.status()));
  std::vector<PartProgress> all;
  for (const std::string& text : all_gather(json(progress_of(*part)).dump())) {
    all.push_back(json::parse(text).get<PartProgress>());
  }
  const bool level = std::all_of(all.begin(), all.end(), [&](const PartProgress& p) {
    return p.step == all.front().step && !p.mid_sweep;
  });
  int64_t round_from = all.front().step;
  for (const PartProgress& p : all) round_from = std::min(round_from, p.round_from);
  if (level) return GridProgress{all.front().step, false, all.front().step, round_from};
  int64_t t = 0, from = all.front().step;
  for (const PartProgress& p : all) {
    t = std::max(t, p.target);
    from = std::min(from, p.step);
  }
  std::string steps;
  bool one_round = true;  // each part at t, or recorded to reach it
  for (const PartProgress& p : all) {
    steps += (steps.empty() ? "" : ", ") + std::to_string(p.step);
    one_round = one_round && p.target == t;
  }
  if (!one_round) {
    return corrupt("the parts of " + m.dir + " stand at time steps " + steps +
                   " with no recorded round that takes them all to one step; restore the grid "
                   "from a backup");
  }
  return GridProgress{t, true, from, round_from};
}

}  // namespace

std::optional<RunRecord> recorded_run(const DistributedManifest& m) {
  std::string text;
  if (rank() == 0) {
    auto read = internal::read_small_file(internal::join_path(m.dir, kRunRecordName));
    if (read.ok()) text = std::move(read).value();
  }
  text = broadcast(text);
  if (text.empty()) return std::nullopt;
  auto r = RunRecord::from_json(text);
  if (!r.ok() || m.step < r->step_from || m.step > r->step_to) return std::nullopt;
  return std::move(r).value();
}

namespace {

// What this run does: `opt` from the step the parts hold, or, with --resume or the same command
// as the recorded run's, the rest of that run (its scheme, boundary and target replace opt's).
Result<RunRecord> run_to_do(const DistributedManifest& m, const GridProgress& g,
                            const std::optional<RunRecord>& recorded, RunOptions* opt,
                            bool* resumed) {
  *resumed = recorded && (opt->resume || repeats(*recorded, *opt));
  if (*resumed) {
    DG_ASSIGN_OR_RETURN(*opt, rest_of(*recorded, g.at, std::move(*opt)));
    return *recorded;
  }
  if (opt->resume) {
    return invalid_argument(m.dir + " has no unfinished run to resume (it is at step " +
                            std::to_string(g.at) + "); give --steps to start one");
  }
  if (g.mid_round && recorded) {
    return invalid_argument(m.dir + " holds " + recorded->describe() +
                            ", stopped part-way; finish it with 'mpirun -n " +
                            std::to_string(m.ranks()) + " deepgrid run " + m.dir + " --resume'");
  }
  if (g.mid_round || (g.at != m.step && !recorded)) {
    return corrupt("the parts of " + m.dir + " stand at time step " + std::to_string(g.at) +
                   " but the grid is at step " + std::to_string(m.step) +
                   " and no run record says why; restore the grid from a backup");
  }
  return record_of(*opt, g.at, opt->method);
}

// The options of a part's engine for the run `opt` on the part `info` of grid `m`.
RunOptions engine_options(const RunOptions& opt, const PartInfo& info,
                          const DistributedManifest& m) {
  RunOptions part_opt = opt;
  part_opt.bt = 0;  // --bt is the exchange depth; the part's engine plans its own
  part_opt.progress = {};
  GridPlacement& at = part_opt.placement;
  at = {info.origin(kAxisX), info.origin(kAxisY), info.origin(kAxisZ), m.shape};
  // The block, bounded where halos lie: only it must be exact at the end of a round.
  const Block block = info.to_local(info.block);
  for (int a = 0; a < 3; ++a) {
    const size_t i = static_cast<size_t>(a);
    if (info.halo.below[i] > 0) at.needed_lo[i] = block[a].lo;
    if (info.halo.above[i] > 0) at.needed_hi[i] = block[a].hi;
  }
  return part_opt;
}

// This rank's part as a run with exchange depth k lays it out (split as `next`), and the plan
// of its engine for a round of `steps` steps (not collective).
Result<RunPlan> plan_part(const DistributedManifest& next, const RunOptions& opt, int k,
                          int64_t steps, PartInfo* laid_out) {
  PartInfo mine = next.parts[static_cast<size_t>(rank())];
  mine.halo = fitted_halo(mine, next.shape, halo_of_depth(opt.scheme, k),
                          opt.boundary.kind == Boundary::Kind::kPeriodic);
  if (laid_out != nullptr) *laid_out = mine;
  RunOptions part_opt = engine_options(opt, mine, next);
  part_opt.steps = steps;
  DG_ASSIGN_OR_RETURN(const Manifest part, manifest_for(part_options(grid_options(next), mine)));
  return plan_run(part, next.dir, part_opt, part_opt.machine);
}

// Whether this rank's part, as the run lays it out (split as `next`, with the halos of its
// exchange depth), leaves its engine enough of --mem for a round of the `steps` left: checked
// before anything is laid out again, so that a budget too small changes nothing (the engine
// checks again on the part as laid out). Collective.
Status check_part_budget(const DistributedManifest& next, const RunOptions& opt, int64_t steps) {
  if (steps <= 0) return Status::Ok();
  const int k = exchange_depth(next, opt);
  return agree(plan_part(next, opt, k, std::min<int64_t>(k, steps), nullptr).status());
}

// A pass of a part's engine in a round that began at step *round_from: saves its receivers'
// values, and asks the caller's callback whether to go on (with the steps of the run done).
ProgressFn after_each_pass(const Grid& part, PartProbes& probes, const RunOptions& opt,
                           const RunRecord& run, const int64_t* round_from) {
  return [&part, &probes, &opt, &run, round_from](int64_t done, int64_t) {
    const bool saved = probes.traces.receivers == 0 ||
                       write_traces_npy(probes.traces, part_traces_path(part)).ok();
    return saved && (!opt.progress ||
                     opt.progress(*round_from + done - run.step_from, run.step_to - run.step_from));
  };
}

// Resuming a stopped run: when a round was cut short first takes every part to its end, each
// finishing its own recorded round (the parts already there do nothing); then gathers what
// the receivers recorded in the parts since `from` (the last round's start) into `whole`,
// which holds those steps. Returns whether every part got there (false: the progress callback
// stopped one). Collective.
Result<bool> finish_round(const DistributedManifest& m, const GridProgress& progress, int64_t from,
                          const RunOptions& opt, const ResolvedProbes& all_probes,
                          const RunRecord& run, Traces* whole, RankFigures* figures) {
  auto opened = open_part_as_is(m, rank(), Grid::Mode::kReadWrite);
  DG_RETURN_IF_ERROR(agree(opened.status()));
  Grid part = std::move(opened).value();
  const PartInfo& info = m.parts[static_cast<size_t>(rank())];
  PartProbes probes = part_share(all_probes, info, m, opt, run, from, whole->capacity(), &part);
  probes.resolved.traces = probes.traces.receivers > 0 ? &probes.traces : nullptr;
  Status st;
  bool stopped = false;
  if (progress.mid_round && (unfinished_run(part) || !part.interrupted_sweep().empty())) {
    RunOptions base = engine_options(opt, info, m);
    const int64_t round_from = part.manifest().step;
    base.progress = after_each_pass(part, probes, opt, run, &round_from);
    auto finishing = options_to_finish(part, base);
    st = finishing.status();
    if (st.ok()) {
      const int64_t to = part.manifest().step + finishing->steps;
      auto advanced =
          advance_grid(part, *finishing, probes.resolved.empty() ? nullptr : &probes.resolved);
      st = advanced.status();
      if (st.ok()) add_advance(figures, *advanced);
      stopped = st.ok() && part.manifest().step != to;
    }
  }
  DG_RETURN_IF_ERROR(agree(st));
  stopped = any_rank(stopped);
  if (!all_probes.receivers.empty()) {
    DG_RETURN_IF_ERROR(write_traces_on_root(&probes, whole, opt.traces_path, from, progress.at));
  }
  return !stopped;
}

// The run's report: every rank's figures, the global ones, `from` .. `to` the steps every part
// advanced through (to < run.step_to: stopped early). Collective.
DistributedRunReport gather_report(const RankFigures& mine, const DistributedManifest& m,
                                   const RunOptions& opt, int k, int64_t from, int64_t to,
                                   const RunRecord& run, bool direct_io) {
  DistributedRunReport report;
  report.ranks = size();
  report.exchange_bt = k;
  report.halo = exchanged_halo(opt.scheme, k, m.procs);
  report.process_grid = m.procs.to_string();
  for (const std::string& f : all_gather(mine.to_json())) {
    report.per_rank.push_back(RankFigures::from_json(f));
  }
  RunReport& t = report.total;
  t.method = "mpi:" + mine.method;
  describe_problem(&t, m.shape, m.dtype, opt);
  t.bt = k;
  t.tile = "process grid " + m.procs.to_string();
  t.step_from = from;
  t.step_to = to;
  t.steps = to - from;
  t.step_target = run.step_to;
  t.direct_io = direct_io;
  for (const RankFigures& f : report.per_rank) {
    t.compute_seconds += f.compute_seconds;
    t.io_wait_seconds += f.io_wait_seconds;
    t.bytes_read += f.bytes_read;
    t.bytes_written += f.bytes_written;
    t.engine_memory = std::max(t.engine_memory, f.engine_memory);  // --mem is each rank's
    t.threads = std::max(t.threads, f.threads);                    // and so is --threads
    if (!f.io_backend.empty() && t.io_backend.find(f.io_backend) == std::string::npos) {
      t.io_backend += (t.io_backend.empty() ? "" : ", ") + f.io_backend;  // the ranks' own
    }
  }
  record_machines_steal(report.per_rank, &t);
  t.peak_memory = peak_resident_bytes();
  return report;
}

// The rank's machine, and what the hypervisor took from it since stolen_cpu_seconds() returned
// `at_start`.
void record_steal(double at_start, RankFigures* f) {
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  f->host.assign(name, static_cast<size_t>(length));
  RunReport machine;
  machine.record_steal_since(at_start);
  f->stolen_cpu_seconds = machine.stolen_cpu_seconds;
  f->cpus = machine.cpus;
}

}  // namespace

void share_machine(RunOptions* opt) {
  if (opt->threads == 0 && std::getenv("OMP_NUM_THREADS") == nullptr) opt->threads = cpu_share();
  opt->record_disk_rate = opt->record_disk_rate && ranks_on_this_machine() == 1;
}

Result<DistributedRunReport> run_distributed(const std::string& dir, const RunOptions& given,
                                             const std::optional<ProcessGrid>& procs) {
  const auto t0 = std::chrono::steady_clock::now();
  const double wait0 = agree_wait_seconds();
  const double stolen0 = stolen_cpu_seconds();
  DG_ASSIGN_OR_RETURN(DistributedManifest m, load_distributed(dir));
  // Rank 0 holds DIR's lock for the run: a second run of the grid is refused before it lays
  // out or redistributes anything.
  DG_ASSIGN_OR_RETURN(const std::optional<internal::GridLock> lock, lock_on_root(dir));
  RunOptions opt = given;  // with the grid's own scheme when none is given (each rank loads
                           // a user's kernel library itself)
  share_machine(&opt);
  const Manifest whole = m.as_grid();
  // (resuming, the stopped run's scheme replaces it in run_to_do)
  auto scheme = given.resume ? Result<Scheme>(given.scheme) : scheme_for(whole, given.scheme);
  DG_RETURN_IF_ERROR(agree(scheme.status()));
  opt.scheme = std::move(scheme).value();
  DG_RETURN_IF_ERROR(settle_prepared(m));
  DG_ASSIGN_OR_RETURN(const GridProgress progress, grid_progress(m));
  bool resumed = false;
  auto todo = run_to_do(m, progress, recorded_run(m), &opt, &resumed);
  DG_RETURN_IF_ERROR(agree(todo.status()));
  const RunRecord run = std::move(todo).value();
  DG_RETURN_IF_ERROR(check_run(whole, opt));
  DG_ASSIGN_OR_RETURN(
      const ResolvedProbes all_probes,
      resolve_probes(opt.probes, m.shape,
                     whole.fields.empty() ? std::vector<std::string>{"u"} : whole.fields));
  // (rank 0 alone writes the traces file: its directory need not exist on other machines)
  DG_RETURN_IF_ERROR(
      agree(rank() == 0 ? check_traces_destination(all_probes, opt.traces_path) : Status::Ok()));
  DG_ASSIGN_OR_RETURN(const ProcessGrid grid, run_process_grid(m, procs));
  // The receivers' values are held one round at a time: resuming, first the steps since the
  // last round's start, which may be in the streamed parts' files only.
  const int64_t held_from = std::max(run.step_from, progress.round_from);
  int64_t held_steps = 1;
  {
    const DistributedManifest laid_out = split_as(m, grid);  // as the run will split it
    held_steps = std::max<int64_t>(exchange_depth(laid_out, opt), progress.at - held_from);
    DG_RETURN_IF_ERROR(leave_room_for_traces(m, laid_out, all_probes, held_steps, resumed, &opt));
    DG_RETURN_IF_ERROR(check_part_budget(laid_out, opt, run.step_to - progress.at));
  }
  // The run's traces, on rank 0 (resumed: with what the stopped run saved).
  Traces traces = run_traces(run.step_from, run.step_to,
                             rank() == 0 ? static_cast<int64_t>(all_probes.receivers.size()) : 0,
                             held_steps, held_from + 1);
  if (resumed) load_held_rows(&traces, opt.traces_path);
  RankFigures mine;
  mine.rank = rank();
  auto finish = [&](int k, int64_t to, bool direct_io) {
    mine.seconds = seconds_since(t0);
    mine.wait_seconds = agree_wait_seconds() - wait0;
    record_steal(stolen0, &mine);
    DistributedRunReport r = gather_report(mine, m, opt, k, progress.from, to, run, direct_io);
    r.total.resumed = resumed;
    r.total.seconds = seconds_since(t0);
    return r;
  };
  if (resumed && size() == m.ranks()) {
    DG_ASSIGN_OR_RETURN(const bool finished,
                        finish_round(m, progress, held_from, opt, all_probes, run, &traces, &mine));
    if (!finished) return finish(0, progress.from, true);  // the records stay
  }
  const int64_t recorded_step = m.step;
  m.step = progress.at;
  if (!resumed) {  // the record's range must hold the manifest's step
    if (m.step != recorded_step) DG_RETURN_IF_ERROR(write_on_root(dir, m));
    DG_RETURN_IF_ERROR(agree(rank() == 0
                                 ? internal::write_file_atomic(dir, kRunRecordName, run.to_json())
                                 : Status::Ok()));
  }
  DG_RETURN_IF_ERROR(redistribute(dir, &m, grid, opt.verify));
  const bool periodic = opt.boundary.kind == Boundary::Kind::kPeriodic;
  const int k = exchange_depth(m, opt);
  const std::array<int64_t, 3> halo = halo_of_depth(opt.scheme, k);
  DG_RETURN_IF_ERROR(fit_halos(dir, &m, halo, periodic, opt.verify));
  const PartInfo& info = m.parts[static_cast<size_t>(rank())];
  auto opened = open_part(m, rank(), Grid::Mode::kReadWrite);
  DG_RETURN_IF_ERROR(agree(opened.status()));
  Grid part = std::move(opened).value();
  const std::vector<BoxTransfer> transfers = halo_transfers(m.parts, m.shape, periodic);
  if (!resumed) ::unlink(part_traces_path(part).c_str());  // a stopped run's, if any

  PartProbes probes = part_share(all_probes, info, m, opt, run, m.step, held_steps, nullptr);
  probes.resolved.traces = probes.traces.receivers > 0 ? &probes.traces : nullptr;
  RunOptions part_opt = engine_options(opt, info, m);
  int64_t step = m.step;  // the first of the round under way
  part_opt.progress = after_each_pass(part, probes, opt, run, &step);
  mine.part_planes = info.shape().nz;
  const uint64_t exchange_buffers = opt.mem_budget > 0 ? opt.mem_budget : uint64_t{256} << 20;
  auto last_commit = std::chrono::steady_clock::now();
  RunOptions first_round = part_opt;
  first_round.steps = std::min<int64_t>(k, run.step_to - step);
  DG_ASSIGN_OR_RETURN(std::optional<ResidentGrid> held,
                      hold_in_memory(part, first_round, run, step, &mine));
  double commit_seconds = seconds_since(last_commit);  // until the first commit: the load's
  last_commit = std::chrono::steady_clock::now();
  if (held) {
    // The exchange's buffers within what the engine leaves of the budget.
    const uint64_t engine = held->plan().memory_bytes;
    const uint64_t buffers = opt.mem_budget == 0       ? exchange_buffers
                             : opt.mem_budget > engine ? opt.mem_budget - engine
                                                       : 1;
    DG_ASSIGN_OR_RETURN(HaloExchange exchange,
                        HaloExchange::create(planes_of(*held, part), transfers, buffers));
    // A part with halos computes what needs none of them while they travel: the exchange's
    // second half runs inside the round's first pass.
    const bool has_halos = info.halo != HaloExtent{};
    bool stop = false;
    while (step < run.step_to && !stop) {
      Result<ExchangeStats> ex = ExchangeStats{};
      LateHalos late;
      if (has_halos) {
        exchange.begin();
        late = {info.halo.below, info.halo.above, [&] { ex = exchange.finish(); }};
      } else {
        ex = exchange.run();  // (nothing to receive, nor to wait for)
        DG_RETURN_IF_ERROR(ex.status());
      }
      RunOptions round = part_opt;
      round.steps = std::min<int64_t>(k, run.step_to - step);
      bool asked_to_stop = false;  // the parts stop together, at the end of a round
      round.progress = [&](int64_t done, int64_t) {
        asked_to_stop = asked_to_stop ||
                        (opt.progress &&
                         !opt.progress(step + done - run.step_from, run.step_to - run.step_from));
        return true;  // (a round is short: the parts stop together at its end)
      };
      add_advance(&mine, held->advance(round, step,
                                       probes.resolved.empty() ? nullptr : &probes.resolved, late));
      DG_RETURN_IF_ERROR(ex.status());  // (agreed: every rank returns)
      add_exchange(&mine, *ex);
      step += round.steps;
      if (!all_probes.receivers.empty()) {
        DG_RETURN_IF_ERROR(
            write_traces_on_root(&probes, &traces, opt.traces_path, step - round.steps, step));
      }
      stop = any_rank(asked_to_stop);
      if (!stop && step < run.step_to &&
          any_rank(
              checkpoint_due(opt.checkpoint_seconds, seconds_since(last_commit), commit_seconds))) {
        const auto t = std::chrono::steady_clock::now();
        DG_RETURN_IF_ERROR(commit_held(part, *held, step, &mine));
        commit_seconds = seconds_since(t);
        last_commit = std::chrono::steady_clock::now();
      }
    }
    DG_RETURN_IF_ERROR(commit_held(part, *held, step, &mine));
    if (stop) return finish(k, step, part.direct_io());
  }
  for (; step < run.step_to; step += part_opt.steps) {  // (held: at the end already)
    DG_ASSIGN_OR_RETURN(const ExchangeStats ex,
                        exchange_halos(planes_of(part), transfers, exchange_buffers));
    add_exchange(&mine, ex);
    part_opt.steps = std::min<int64_t>(k, run.step_to - step);
    // The halos are in place on every rank: from here each part can finish the round alone.
    Status recorded = commit_with_history(part, step, "", {});
    if (recorded.ok()) recorded = record_run(part, part_opt);
    DG_RETURN_IF_ERROR(agree(recorded));
    auto advanced =
        advance_grid(part, part_opt, probes.resolved.empty() ? nullptr : &probes.resolved);
    Status st = advanced.status();
    bool stopped = false;
    if (st.ok()) {
      add_advance(&mine, *advanced);
      st = commit_with_history(part, advanced->step_to, "", {});
      stopped = advanced->step_to != step + part_opt.steps;
    }
    DG_RETURN_IF_ERROR(agree(st));
    stopped = any_rank(stopped);
    if (!all_probes.receivers.empty()) {
      DG_RETURN_IF_ERROR(
          write_traces_on_root(&probes, &traces, opt.traces_path, step, step + part_opt.steps));
    }
    // A part stopped by the callback: the round stays unfinished, and so do the records.
    if (stopped) return finish(k, step, part.direct_io());
  }

  DistributedRunReport report = finish(k, run.step_to, part.direct_io());
  m.step = run.step_to;
  json details = {{"stencil", json::parse(opt.scheme.to_json())},
                  {"boundary", report.total.boundary},
                  {"ranks", size()},
                  {"process_grid", m.procs.to_string()},
                  {"exchange_bt", k},
                  {"steps", run.step_to - run.step_from},
                  {"step_from", run.step_from},
                  {"step_to", run.step_to}};
  if (resumed) details["resumed"] = true;
  m.history.push_back({utc_now(), "run", details.dump()});
  DG_RETURN_IF_ERROR(write_on_root(dir, m));
  // Done: the records go (a stop before here leaves them; the same command again then finds
  // the run done). The parts' round records are finished ones already.
  if (rank() == 0) ::unlink(internal::join_path(dir, kRunRecordName).c_str());
  ::unlink(part_traces_path(part).c_str());
  return report;
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DistributedPlan::Part, rank, shape, plan, predicted_seconds)

std::string DistributedPlan::to_json() const {
  json j = {{"grid", grid},
            {"stencil", stencil},
            {"ranks", ranks},
            {"process_grid", process_grid},
            {"exchange_bt", exchange_bt},
            {"halo", halo},
            {"steps", steps},
            {"rounds", rounds},
            {"parts_in_memory", parts_in_memory},
            {"per_rank", json::array()}};
  double slowest = 0;
  for (const Part& p : per_rank) {
    json part = p;
    part["plan"] = json::parse(p.plan);
    j["per_rank"].push_back(part);
    slowest = std::max(slowest, p.predicted_seconds);
  }
  j["predicted_seconds"] = slowest;
  return j.dump();
}

std::string DistributedPlan::to_text() const {
  std::string out;
  char line[320];
  std::snprintf(line, sizeof line,
                "grid        %s, distributed over %d rank%s (process grid %s)\n"
                "stencil     %s, %lld steps in %lld rounds of up to %d\n",
                grid.c_str(), ranks, ranks == 1 ? "" : "s", process_grid.c_str(), stencil.c_str(),
                static_cast<long long>(steps), static_cast<long long>(rounds), exchange_bt);
  out += line;
  if (ranks > 1) {
    std::snprintf(line, sizeof line,
                  "exchange    halos before every round: %lld, %lld, %lld points along x, y, z\n",
                  static_cast<long long>(halo[0]), static_cast<long long>(halo[1]),
                  static_cast<long long>(halo[2]));
    out += line;
  }
  out += parts_in_memory
             ? "parts       held in memory for the whole run: loaded once, written at the end "
               "(and at checkpoints); halos exchanged from memory to memory\n"
             : "parts       streamed: every round goes through the parts' files (a part that does "
               "not fit --mem streams, and then every part's round does)\n";
  out += "rank  part              method  bt  memory      predicted\n";
  double slowest = 0;
  for (const Part& p : per_rank) {
    const json plan = json::parse(p.plan);
    std::snprintf(
        line, sizeof line, "%4d  %-16s  %-6s  %2d  %-10s  %8.2f s\n", p.rank, p.shape.c_str(),
        plan.at("method").get<std::string>().c_str(), plan.at("bt").get<int>(),
        format_size(plan.at("memory_bytes").get<uint64_t>()).c_str(), p.predicted_seconds);
    out += line;
    slowest = std::max(slowest, p.predicted_seconds);
  }
  std::snprintf(line, sizeof line,
                "predicted   %.2f s for the slowest part's engine (halo exchanges and waits are "
                "not predicted)\n",
                slowest);
  return out + line;
}

Result<DistributedPlan> plan_distributed(const std::string& dir, const RunOptions& given,
                                         const std::optional<ProcessGrid>& procs) {
  DG_ASSIGN_OR_RETURN(const DistributedManifest m, load_distributed(dir));
  RunOptions opt = given;
  share_machine(&opt);
  const Manifest whole = m.as_grid();
  auto scheme = scheme_for(whole, given.scheme);
  DG_RETURN_IF_ERROR(agree(scheme.status()));
  opt.scheme = std::move(scheme).value();
  DG_RETURN_IF_ERROR(check_run(whole, opt));
  DG_ASSIGN_OR_RETURN(const ProcessGrid grid, run_process_grid(m, procs));
  const DistributedManifest next = split_as(m, grid);
  DistributedPlan plan;
  plan.grid = m.shape.to_string() + " " + std::string(dtype_name(m.dtype));
  plan.stencil = opt.scheme.describe();
  plan.ranks = size();
  plan.process_grid = grid.to_string();
  plan.exchange_bt = exchange_depth(next, opt);
  plan.halo = exchanged_halo(opt.scheme, plan.exchange_bt, grid);
  plan.steps = opt.steps;
  const int64_t k = plan.exchange_bt, full = opt.steps / k, rest = opt.steps % k;
  plan.rounds = full + (rest > 0 ? 1 : 0);
  PartInfo laid_out;
  Result<RunPlan> round = plan_part(next, opt, plan.exchange_bt, full > 0 ? k : rest, &laid_out);
  DG_RETURN_IF_ERROR(agree(round.status()));
  Result<RunPlan> last = *round;
  if (full > 0 && rest > 0) last = plan_part(next, opt, plan.exchange_bt, rest, nullptr);
  DG_RETURN_IF_ERROR(agree(last.status()));
  plan.parts_in_memory = !any_rank(round->method != Method::kInCore);
  // Parts in memory load and write once; streamed parts go through their files every round.
  auto per_round = [&](const RunPlan& p) {
    return plan.parts_in_memory ? p.predicted_compute_seconds : p.predicted_seconds;
  };
  double seconds =
      static_cast<double>(full) * per_round(*round) + (rest > 0 ? per_round(*last) : 0);
  if (plan.parts_in_memory) seconds += round->predicted_seconds - round->predicted_compute_seconds;
  const DistributedPlan::Part mine{rank(), laid_out.shape().to_string(), round->to_json(), seconds};
  for (const std::string& text : all_gather(json(mine).dump())) {
    plan.per_rank.push_back(json::parse(text).get<DistributedPlan::Part>());
  }
  return plan;
}

}  // namespace deepgrid::mpi
