#include "mpi/distributed_grid.h"

#include <fcntl.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "deepgrid/init.h"
#include "deepgrid/npy.h"
#include "internal/file_util.h"
#include "internal/grid_lock.h"
#include "mpi/comm.h"
#include "mpi/halo_exchange.h"

namespace deepgrid::mpi {

using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

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

// Where a new grid's values come from, filling one slab of a part at a time, and what the
// grid's history says about it.
struct SlabSource {
  std::function<Status(Grid& part, const Slab& slab)> fill;
  std::string command;  // "create", "import", "redistribute"
  json details;
  int64_t step = 0;  // the time step of the values
};

// Writes the slab's planes in batches of a chunk: produce(z, n, values) fills global planes
// [z, z + n) packed.
Status write_slab(Grid& part, const Slab& slab,
                  const std::function<Status(int64_t, int64_t, std::byte*)>& produce) {
  const int64_t batch = part.manifest().layout.planes_per_chunk;
  const int64_t plane_bytes = part.manifest().layout.plane_bytes;
  std::vector<std::byte> planes(static_cast<size_t>(batch * plane_bytes));
  for (int64_t z = slab.z0; z < slab.z1; z += batch) {
    const int64_t n = std::min(batch, slab.z1 - z);
    DG_RETURN_IF_ERROR(produce(z, n, planes.data()));
    DG_RETURN_IF_ERROR(part.write_planes(z - slab.z0, n, planes.data()));
  }
  return Status::Ok();
}

// The initial condition at the planes' global coordinates.
SlabSource initial_condition(const CreateOptions& global) {
  SlabSource source;
  source.command = "create";
  source.details = {{"shape", global.shape.to_string()},
                    {"dtype", dtype_name(global.dtype)},
                    {"init", global.init.to_string()}};
  source.fill = [global](Grid& part, const Slab& slab) -> Status {
    if (global.init.kind == InitSpec::Kind::kZero) return Status::Ok();  // created as zeros
    const int64_t plane = global.shape.plane_points();
    return write_slab(part, slab, [&](int64_t z, int64_t n, std::byte* out) {
      dispatch_dtype(global.dtype, [&](auto tag) {
        using T = decltype(tag);
        for (int64_t i = 0; i < n; ++i) {
          init_plane(global.init, global.shape, z + i, reinterpret_cast<T*>(out) + i * plane);
        }
      });
      return Status::Ok();
    });
  };
  return source;
}

// The planes of a .npy file every rank can read (a shared filesystem, or one machine).
SlabSource npy_planes(const std::string& path, const NpyHeader& header) {
  SlabSource source;
  source.command = "import";
  source.details = {{"from", "npy"}, {"file", internal::absolute_path(path)}};
  source.fill = [path, header](Grid& part, const Slab& slab) -> Status {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_status(errno, "open", path);
    const int64_t plane_bytes = part.manifest().layout.plane_bytes;
    const Status st = write_slab(part, slab, [&](int64_t z, int64_t n, std::byte* out) {
      return internal::pread_full(fd, out, static_cast<size_t>(n * plane_bytes),
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

// This rank's part of a new grid, with its slab's values.
Result<PartInfo> create_part(const std::string& dir, const std::string& id,
                             const CreateOptions& global, const SlabSource& source,
                             const Slab& slab) {
  PartInfo info;
  info.slab = slab;
  info.stores = expand_rank(global.stores, rank());
  for (std::string& s : info.stores) s = internal::absolute_path(s);
  for (const std::string& s : info.stores) {  // the part's directory goes into the first
    if (!internal::is_directory(s)) {
      return invalid_argument("store directory " + s + " does not exist; create it first");
    }
  }
  info.dir = part_directory(dir, id, rank(), info.stores);
  CreateOptions opt;
  opt.shape = {global.shape.nx, global.shape.ny, slab.planes()};
  opt.dtype = global.dtype;
  opt.stores = info.stores;
  opt.spare_planes = global.spare_planes;
  DG_ASSIGN_OR_RETURN(Grid part, Grid::create(info.dir, opt));
  Status st = source.fill(part, slab);
  if (st.ok()) {
    st = commit_with_history(part, source.step, "part",
                             {{"grid", internal::absolute_path(dir)},
                              {"rank", rank()},
                              {"z0", slab.z0},
                              {"z1", slab.z1},
                              {source.command, source.details}});
  }
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
    p.halo = {j.at("below").get<int64_t>(), j.at("above").get<int64_t>()};
  }
}

Status write_on_root(const std::string& dir, const DistributedManifest& m) {
  return agree(rank() == 0 ? write_distributed_manifest(dir, m) : Status::Ok());
}

}  // namespace

namespace {

Result<DistributedManifest> make_distributed(const std::string& dir, const CreateOptions& options,
                                             const SlabSource& source) {
  DG_ASSIGN_OR_RETURN(const std::vector<Slab> slabs, decompose_z(options.shape.nz, size()));
  DG_RETURN_IF_ERROR(plan_layout(options.shape, options.dtype, 1, kDirectIoAlignment, 0).status());
  bool made_dir = false;
  DG_RETURN_IF_ERROR(agree(rank() == 0 ? make_top_directory(dir, &made_dir) : Status::Ok()));
  DistributedManifest m;
  m.id = broadcast(rank() == 0 ? new_id() : std::string());
  m.shape = options.shape;
  m.dtype = options.dtype;
  m.parts.resize(slabs.size());
  for (size_t r = 0; r < slabs.size(); ++r) m.parts[r].slab = slabs[r];
  auto part = create_part(dir, m.id, options, source, slabs[static_cast<size_t>(rank())]);
  Status st = agree(part.status());
  if (st.ok()) {
    share_parts(&m, *part);
    json details = source.details;
    details["ranks"] = size();
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

Result<DistributedManifest> create_distributed(const std::string& dir,
                                               const CreateOptions& options) {
  return make_distributed(dir, options, initial_condition(options));
}

Result<DistributedManifest> import_distributed(const std::string& npy_path, const std::string& dir,
                                               const std::vector<std::string>& stores) {
  auto header = read_npy_header(npy_path);
  DG_RETURN_IF_ERROR(agree(header.status()));
  CreateOptions options;
  options.shape = header->shape;
  options.dtype = header->dtype;
  options.stores = stores;
  return make_distributed(dir, options, npy_planes(npy_path, *header));
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
  return DistributedManifest::from_json(broadcast(text));
}

namespace {

// A plane message to rank 0: an error code (0: planes follow), then the planes or the message.
constexpr int kPlaneTag = 7;

void send_planes_to_root(const DistributedManifest& m, bool verify) {
  const PartInfo& info = m.parts[static_cast<size_t>(rank())];
  const size_t plane_bytes = static_cast<size_t>(m.shape.plane_points()) * dtype_size(m.dtype);
  const int64_t batch = std::max<int64_t>(1, (8 << 20) / static_cast<int64_t>(plane_bytes));
  std::vector<std::byte> msg(sizeof(int64_t) + static_cast<size_t>(batch) * plane_bytes);
  int64_t filled = 0;
  const auto flush = [&] {
    const int64_t ok = 0;
    std::memcpy(msg.data(), &ok, sizeof ok);
    MPI_Send(msg.data(), static_cast<int>(sizeof ok + static_cast<size_t>(filled) * plane_bytes),
             MPI_BYTE, 0, kPlaneTag, MPI_COMM_WORLD);
    filled = 0;
  };
  Status st = [&]() -> Status {
    DG_ASSIGN_OR_RETURN(Grid part, open_part(m, rank(), Grid::Mode::kReadOnly));
    if (verify) DG_RETURN_IF_ERROR(part.enable_verification());
    return read_slab_planes(part, info, [&](int64_t, const void* values) {
      std::memcpy(msg.data() + sizeof(int64_t) + static_cast<size_t>(filled) * plane_bytes, values,
                  plane_bytes);
      if (++filled == batch) flush();
      return Status::Ok();
    });
  }();
  if (st.ok()) {
    if (filled > 0) flush();
    return;
  }
  // The error ends this rank's stream; rank 0 shares it through agree().
  std::string err(sizeof(int64_t), '\0');
  const int64_t code = static_cast<int64_t>(st.code());
  std::memcpy(err.data(), &code, sizeof code);
  err += st.message();
  MPI_Send(err.data(), static_cast<int>(err.size()), MPI_BYTE, 0, kPlaneTag, MPI_COMM_WORLD);
}

// Rank 0 takes rank r's planes in order; after an error it still drains them.
Status receive_planes(const DistributedManifest& m, int r, Status* first,
                      const io::PlaneConsumer& consume) {
  const PartInfo& info = m.parts[static_cast<size_t>(r)];
  const size_t plane_bytes = static_cast<size_t>(m.shape.plane_points()) * dtype_size(m.dtype);
  std::vector<std::byte> msg;
  int64_t z = info.slab.z0;
  while (z < info.slab.z1) {
    MPI_Status probe;
    MPI_Probe(r, kPlaneTag, MPI_COMM_WORLD, &probe);
    int bytes = 0;
    MPI_Get_count(&probe, MPI_BYTE, &bytes);
    msg.resize(static_cast<size_t>(bytes));
    MPI_Recv(msg.data(), bytes, MPI_BYTE, r, kPlaneTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int64_t code = 0;
    std::memcpy(&code, msg.data(), sizeof code);
    if (code != 0) {
      return Status(static_cast<ErrorCode>(code),
                    "rank " + std::to_string(r) + ": " +
                        std::string(reinterpret_cast<const char*>(msg.data()) + sizeof code,
                                    msg.size() - sizeof code));
    }
    const size_t planes = (msg.size() - sizeof code) / plane_bytes;
    for (size_t i = 0; i < planes; ++i, ++z) {
      if (first->ok()) *first = consume(z, msg.data() + sizeof code + i * plane_bytes);
    }
  }
  return Status::Ok();
}

}  // namespace

Status gather_planes(const DistributedManifest& m, bool verify, const io::PlaneConsumer& consume) {
  if (m.ranks() != size()) {  // rank 0 reads every part itself
    return agree(rank() == 0 ? read_distributed_planes(m, verify, consume) : Status::Ok());
  }
  if (rank() != 0) {
    send_planes_to_root(m, verify);
    return agree(Status::Ok());
  }
  Status first;
  const Status own = [&]() -> Status {
    DG_ASSIGN_OR_RETURN(Grid part, open_part(m, 0, Grid::Mode::kReadOnly));
    if (verify) DG_RETURN_IF_ERROR(part.enable_verification());
    return read_slab_planes(part, m.parts[0], consume);
  }();
  if (!own.ok()) first = own;
  for (int r = 1; r < m.ranks(); ++r) {
    const Status sent = receive_planes(m, r, &first, consume);
    if (first.ok() && !sent.ok()) first = sent;
  }
  return agree(first);
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

// Steps between halo exchanges when --bt is not given: the halo (k * r_z planes each side)
// stays within an eighth of the thinnest slab, as redundant work on the halos grows with it,
// and at most 64 (as the stream engine's sweeps).
int exchange_depth(const DistributedManifest& m, const RunOptions& opt) {
  if (opt.bt > 0) return opt.bt;
  const int rz = opt.scheme.radius_z();
  if (rz == 0) return static_cast<int>(std::clamp<int64_t>(opt.steps, 1, 64));
  int64_t thinnest = m.shape.nz;
  for (const PartInfo& p : m.parts) thinnest = std::min(thinnest, p.slab.planes());
  return static_cast<int>(std::clamp<int64_t>(thinnest / (8 * rz), 1, 64));
}

// Rewrites this rank's part with the halo `need` (its slab's planes copied), in place of the
// old one: a new part beside it, then the old one removed and the new one renamed over it.
Status relayout_part(const DistributedManifest& m, PartInfo* info, const HaloExtent& need) {
  const std::string fresh_dir = info->dir + ".new";
  if (internal::is_directory(fresh_dir)) {
    return corrupt(fresh_dir + " is left from an interrupted re-layout of part " +
                   std::to_string(rank()) + " (the part in " + info->dir +
                   " is intact); remove it and run again");
  }
  PartInfo fresh_info = *info;
  fresh_info.halo = need;
  CreateOptions opt;
  opt.shape = {m.shape.nx, m.shape.ny, fresh_info.planes()};
  opt.dtype = m.dtype;
  opt.stores = info->stores;
  const Status copied = [&]() -> Status {
    DG_ASSIGN_OR_RETURN(Grid fresh, Grid::create(fresh_dir, opt));
    DG_ASSIGN_OR_RETURN(Grid old, open_part(m, rank(), Grid::Mode::kReadOnly));
    DG_RETURN_IF_ERROR(read_slab_planes(old, *info, [&](int64_t z, const void* values) {
      return fresh.write_planes(need.below + z - info->slab.z0, 1, values);
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

// Makes every part's halo fit k steps, sharing the result in the manifest on disk. When some
// rank fails, the parts laid out again on the others are recorded all the same, so that the
// manifest keeps describing every part.
Status fit_halos(const std::string& dir, DistributedManifest* m, int64_t halo, bool periodic) {
  PartInfo mine = m->parts[static_cast<size_t>(rank())];
  const HaloExtent need = needed_halo(mine.slab, m->shape.nz, halo, periodic);
  const bool fits = halo_suffices(mine.halo, need, mine.slab, m->shape.nz, periodic);
  const Status laid_out = agree(fits ? Status::Ok() : relayout_part(*m, &mine, need));
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
                                   bytes_read, bytes_written, bytes_sent)

std::string RankFigures::to_json() const { return json(*this).dump(); }

RankFigures RankFigures::from_json(const std::string& text) {
  return json::parse(text).get<RankFigures>();
}

std::string DistributedRunReport::to_json() const {
  json j = json::parse(total.to_json());
  j["ranks"] = ranks;
  j["exchange_bt"] = exchange_bt;
  j["halo_planes"] = halo;
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
  std::snprintf(line, sizeof line,
                "ranks       %d, halo exchange every %d steps (%lld planes each side)\n", ranks,
                exchange_bt, static_cast<long long>(halo));
  out += line;
  out +=
      "rank  method  planes  seconds  compute  disk-wait  exchange  waiting  read      written\n";
  for (const RankFigures& f : per_rank) {
    std::snprintf(line, sizeof line,
                  "%4d  %-6s  %6lld  %7.3f  %7.3f  %9.3f  %8.3f  %7.3f  %-8s  %s\n", f.rank,
                  f.method.c_str(), static_cast<long long>(f.part_planes), f.seconds,
                  f.compute_seconds, f.io_wait_seconds, f.exchange_seconds, f.wait_seconds,
                  format_size(f.bytes_read).c_str(), format_size(f.bytes_written).c_str());
    out += line;
  }
  return out;
}

namespace {

// The slab's planes read from the parts of an older decomposition of the same grid.
SlabSource old_parts(const DistributedManifest& old) {
  SlabSource source;
  source.command = "redistribute";
  source.details = {{"from_ranks", old.ranks()}};
  source.step = old.step;
  source.fill = [&old](Grid& part, const Slab& slab) -> Status {
    for (int o = owner_of(old.slabs(), slab.z0); o < old.ranks(); ++o) {
      const PartInfo& from = old.parts[static_cast<size_t>(o)];
      if (from.slab.z0 >= slab.z1) break;
      DG_ASSIGN_OR_RETURN(Grid old_part, open_part(old, o, Grid::Mode::kReadOnly));
      const int64_t lo = std::max(slab.z0, from.slab.z0), hi = std::min(slab.z1, from.slab.z1);
      const int64_t first = from.halo.below - from.slab.z0;  // part plane of global plane 0
      DG_RETURN_IF_ERROR(io::read_plane_range(
          old_part, first + lo, first + hi, [&](int64_t p, const void* values) {
            return part.write_planes(p - first - slab.z0, 1, values);
          }));
    }
    return Status::Ok();
  };
  return source;
}

// A grid split over another number of ranks than this job has is split again over this job's:
// new parts (under a new id, beside the old ones) are filled from the old parts, which every
// rank must be able to read (one machine, or a shared filesystem); then the manifest naming
// the new parts is committed and the old parts are removed. New rank r keeps its part in the
// stores of old rank r mod (old ranks).
Status redistribute(const std::string& dir, DistributedManifest* m) {
  if (m->ranks() == size()) return Status::Ok();
  const DistributedManifest old = *m;
  DG_ASSIGN_OR_RETURN(const std::vector<Slab> slabs, decompose_z(old.shape.nz, size()));
  DistributedManifest next = old;
  next.id = broadcast(rank() == 0 ? new_id() : std::string());
  next.parts.assign(slabs.size(), {});
  for (size_t r = 0; r < slabs.size(); ++r) next.parts[r].slab = slabs[r];
  CreateOptions options;
  options.shape = old.shape;
  options.dtype = old.dtype;
  options.stores = old.parts[static_cast<size_t>(rank() % old.ranks())].stores;
  auto part =
      create_part(dir, next.id, options, old_parts(old), slabs[static_cast<size_t>(rank())]);
  Status st = agree(part.status());
  if (st.ok()) {
    share_parts(&next, *part);
    next.history.push_back({utc_now(), "redistribute",
                            json{{"from_ranks", old.ranks()}, {"to_ranks", size()}}.dump()});
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

// Adds one advance of the part to the rank's figures.
void add_advance(RankFigures* f, const RunReport& r) {
  f->method = r.method;
  f->engine_bt = r.bt;
  f->compute_seconds += r.compute_seconds;
  f->io_wait_seconds += r.io_wait_seconds;
  f->bytes_read += r.bytes_read;
  f->bytes_written += r.bytes_written;
}

void add_exchange(RankFigures* f, const ExchangeStats& e) {
  f->exchange_seconds += e.seconds;
  f->bytes_read += e.bytes_read;
  f->bytes_written += e.bytes_written;
  f->bytes_sent += e.bytes_sent;
}

}  // namespace

Result<DistributedRunReport> run_distributed(const std::string& dir, const RunOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const double wait0 = agree_wait_seconds();
  DG_ASSIGN_OR_RETURN(DistributedManifest m, load_distributed(dir));
  // Rank 0 holds DIR's lock for the run (the parts have their own): a second run of the grid
  // is refused before it lays out or redistributes anything.
  std::optional<internal::GridLock> lock;
  Status locked;
  if (rank() == 0) {
    auto held = internal::GridLock::acquire(dir, internal::GridLock::Kind::kExclusive);
    locked = held.status();
    if (held.ok()) lock.emplace(std::move(held).value());
  }
  DG_RETURN_IF_ERROR(agree(locked));
  DG_RETURN_IF_ERROR(redistribute(dir, &m));
  Manifest global;
  global.shape = m.shape;
  DG_RETURN_IF_ERROR(check_run(global, opt));
  const bool periodic = opt.boundary.kind == Boundary::Kind::kPeriodic;
  const int k = exchange_depth(m, opt);
  const int64_t halo = static_cast<int64_t>(k) * opt.scheme.radius_z();
  DG_RETURN_IF_ERROR(fit_halos(dir, &m, halo, periodic));
  const PartInfo& info = m.parts[static_cast<size_t>(rank())];
  auto opened = open_part(m, rank(), Grid::Mode::kReadWrite);
  DG_RETURN_IF_ERROR(agree(opened.status()));
  Grid part = std::move(opened).value();
  const std::vector<PlaneTransfer> transfers = halo_transfers(m.parts, m.shape.nz, periodic);

  RunOptions part_opt = opt;
  part_opt.bt = 0;  // --bt is the exchange depth; the part's engine plans its own
  part_opt.progress = {};
  RankFigures mine;
  mine.rank = rank();
  mine.part_planes = info.planes();
  const uint64_t exchange_buffers = opt.mem_budget > 0 ? opt.mem_budget : uint64_t{256} << 20;
  for (int64_t done = 0; done < opt.steps;) {
    DG_ASSIGN_OR_RETURN(const ExchangeStats ex, exchange_halos(part, transfers, exchange_buffers));
    add_exchange(&mine, ex);
    part_opt.steps = std::min<int64_t>(k, opt.steps - done);
    auto advanced = advance_grid(part, part_opt);
    Status st = advanced.status();
    if (st.ok()) {
      add_advance(&mine, *advanced);
      st = commit_with_history(part, advanced->step_to, "", {});
    }
    DG_RETURN_IF_ERROR(agree(st));
    done += part_opt.steps;
  }
  mine.seconds = seconds_since(t0);
  mine.wait_seconds = agree_wait_seconds() - wait0;

  DistributedRunReport report;
  report.ranks = size();
  report.exchange_bt = k;
  report.halo = halo;
  for (const std::string& f : all_gather(mine.to_json())) {
    report.per_rank.push_back(RankFigures::from_json(f));
  }
  RunReport& t = report.total;
  t.method = "mpi:" + mine.method;
  describe_problem(&t, m.shape, m.dtype, opt);
  t.threads = opt.threads;
  t.bt = k;
  t.tile = std::to_string(size()) + " z-slabs";
  t.steps = opt.steps;
  t.step_from = m.step;
  t.step_to = m.step + opt.steps;
  t.direct_io = part.direct_io();
  for (const RankFigures& f : report.per_rank) {
    t.compute_seconds += f.compute_seconds;
    t.io_wait_seconds += f.io_wait_seconds;
    t.bytes_read += f.bytes_read;
    t.bytes_written += f.bytes_written;
  }

  m.step = t.step_to;
  m.history.push_back({utc_now(), "run",
                       json{{"stencil", json::parse(opt.scheme.to_json())},
                            {"boundary", t.boundary},
                            {"ranks", size()},
                            {"exchange_bt", k},
                            {"steps", t.steps},
                            {"step_from", t.step_from},
                            {"step_to", t.step_to}}
                           .dump()});
  DG_RETURN_IF_ERROR(write_on_root(dir, m));
  t.seconds = seconds_since(t0);
  t.peak_memory = peak_resident_bytes();
  return report;
}

}  // namespace deepgrid::mpi
