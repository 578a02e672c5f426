#include "store/distributed_manifest.h"

#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/file_util.h"
#include "core/int_math.h"
#include "store/grid_files.h"
#include "store/grid_paths.h"
#include "store/json_fields.h"
#include "store/plane_rect.h"

namespace deepgrid {

using internal::floor_div;
using internal::integer_at;
using internal::kManifestName;
using nlohmann::json;

namespace {

constexpr const char* kFormatName = "deepgrid-distributed";

// Each part is where deepgrid puts it (grid_paths.h): deepgrid-<id>.part.<rank> in its first
// store (which its directory is then made to be, lexically normal), or beside the manifest
// (whose directory read_distributed_manifest sets). Anything else is refused, so that a crafted
// manifest cannot make a run, a re-layout or a removal reach a directory outside the grid.
Status confine_parts(DistributedManifest* m) {
  for (size_t r = 0; r < m->parts.size(); ++r) {
    PartInfo& p = m->parts[r];
    const std::string name = internal::part_name(m->id, static_cast<int>(r));
    for (std::string& s : p.stores) {
      if (s.empty() || s[0] != '/') return internal::check_store_path(s);
      s = internal::normal_store_path(s);
    }
    const std::string expected =
        p.stores.empty() ? name : internal::join_path(p.stores.front(), name);
    const std::string given = p.stores.empty() ? std::filesystem::path(p.dir).filename().string()
                                               : internal::normal_store_path(p.dir);
    if (given != expected) {
      return corrupt("part " + std::to_string(r) + " is in '" + p.dir.substr(0, 200) +
                     "', not in " + (p.stores.empty() ? "the grid directory as " : "") + expected +
                     " where deepgrid puts it; refusing a grid that points outside itself "
                     "(docs/security.md)");
    }
    p.dir = expected;
  }
  return Status::Ok();
}

Status check_decomposition(const DistributedManifest& m) {
  DG_RETURN_IF_ERROR(validate_shape(m.shape));
  if (m.parts.empty()) return corrupt("the manifest lists no parts");
  const Status fits = check_process_grid(m.procs, m.shape, m.ranks());
  if (!fits.ok()) return corrupt(fits.message());
  const std::vector<Block> blocks = decompose(m.shape, m.procs);
  for (size_t r = 0; r < m.parts.size(); ++r) {
    const PartInfo& p = m.parts[r];
    if (p.block != blocks[r]) {
      return corrupt("part " + std::to_string(r) + " holds block " + p.block.to_string() +
                     " but process grid " + m.procs.to_string() + " gives it " +
                     blocks[r].to_string());
    }
    for (size_t a = 0; a < 3; ++a) {
      if (p.halo.below[a] < 0 || p.halo.above[a] < 0) return corrupt("a part has a negative halo");
    }
    if (p.dir.empty()) return corrupt("a part has no directory");
  }
  if (m.step < 0) return corrupt("the manifest has a negative time step");
  return Status::Ok();
}

constexpr const char* kAxisKey[] = {"x", "y", "z"};

json part_to_json(size_t rank, const PartInfo& p) {
  json box, halo;
  for (int a = 0; a < 3; ++a) {
    box[kAxisKey[a]] = {p.block[a].lo, p.block[a].hi};
    halo[kAxisKey[a]] = {p.halo.below[static_cast<size_t>(a)],
                         p.halo.above[static_cast<size_t>(a)]};
  }
  return {{"rank", rank}, {"box", box}, {"halo", halo}, {"dir", p.dir}, {"stores", p.stores}};
}

int64_t pair_at(const json& j, const char* key, int i) {
  const json& pair = j.at(key);
  if (!pair.is_array() || pair.size() != 2) throw std::runtime_error(std::string(key));
  return pair.at(static_cast<size_t>(i)).get<int64_t>();
}

PartInfo part_from_json(const json& p) {
  PartInfo info;
  for (int a = 0; a < 3; ++a) {
    info.block[a] = {pair_at(p.at("box"), kAxisKey[a], 0), pair_at(p.at("box"), kAxisKey[a], 1)};
    info.halo.below[static_cast<size_t>(a)] = pair_at(p.at("halo"), kAxisKey[a], 0);
    info.halo.above[static_cast<size_t>(a)] = pair_at(p.at("halo"), kAxisKey[a], 1);
  }
  info.dir = p.at("dir").get<std::string>();
  info.stores = p.at("stores").get<std::vector<std::string>>();
  return info;
}

// A version 4 part: a z-slab of whole planes with halo planes below and above.
PartInfo z_slab_part_from_json(const json& p, const Shape& shape) {
  PartInfo info;
  info.block = {
      {Span{0, shape.nx}, Span{0, shape.ny}, Span{integer_at(p, "z0"), integer_at(p, "z1")}}};
  info.halo.below[kAxisZ] = integer_at(p, "halo_below");
  info.halo.above[kAxisZ] = integer_at(p, "halo_above");
  info.dir = p.at("dir").get<std::string>();
  info.stores = p.at("stores").get<std::vector<std::string>>();
  return info;
}

}  // namespace

Shape PartInfo::shape() const {
  const Block h = held();
  return {h.size(kAxisX), h.size(kAxisY), h.size(kAxisZ)};
}

Block PartInfo::held() const {
  Block h = block;
  for (int a = 0; a < 3; ++a) {
    h[a] = {origin(a), block[a].hi + halo.above[static_cast<size_t>(a)]};
  }
  return h;
}

Block PartInfo::to_local(const Block& global) const {
  Block b = global;
  for (int a = 0; a < 3; ++a) b[a] = {global[a].lo - origin(a), global[a].hi - origin(a)};
  return b;
}

Manifest DistributedManifest::as_grid() const {
  Manifest m;
  m.id = id;
  m.shape = shape;
  m.dtype = dtype;
  m.step = step;
  m.fields = fields;
  m.scheme = scheme;
  return m;
}

std::string DistributedManifest::to_json() const {
  json parts_json = json::array();
  for (size_t r = 0; r < parts.size(); ++r) parts_json.push_back(part_to_json(r, parts[r]));
  // Grids of one field keep the version that older deepgrids read.
  const bool one_field = fields.empty() && scheme.empty();
  const int written = one_field && version == kDistributedManifestVersion
                          ? kOneFieldDistributedManifestVersion
                          : version;
  json j = internal::grid_header_json(kFormatName, written, {id, shape, dtype, step});
  internal::put_fields(&j, fields, scheme);
  j["decomposition"] = {
      {"process_grid", procs.p}, {"ranks", parts.size()}, {"parts", std::move(parts_json)}};
  j["history"] = internal::history_json(history);
  return j.dump(2) + "\n";
}

Result<DistributedManifest> DistributedManifest::from_json(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.value("format", "") == "deepgrid-grid") {
    return invalid_argument(
        "this is a serial grid, not a distributed one; run the command without mpirun");
  }
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != kFormatName) {
    return corrupt("manifest is not a distributed deepgrid grid's");
  }
  DistributedManifest m;
  try {
    const int64_t version = integer_at(j, "version");
    if (version > kDistributedManifestVersion) {
      return unsupported("grid was written by a newer deepgrid (format version " +
                         std::to_string(version) + "); upgrade deepgrid");
    }
    DG_ASSIGN_OR_RETURN(const internal::GridHeader header, internal::read_grid_header(j));
    m.id = header.id;
    m.shape = header.shape;
    m.dtype = header.dtype;
    m.step = header.step;
    internal::read_fields(j, &m.fields, &m.scheme);
    const json& d = j.at("decomposition");
    if (version >= 5) {
      m.procs.p = d.at("process_grid").get<std::array<int, 3>>();
      for (const json& p : d.at("parts")) m.parts.push_back(part_from_json(p));
    } else {  // z-slabs
      if (d.at("axis").get<std::string>() != "z") {
        return unsupported("grid is decomposed along an axis this deepgrid does not know");
      }
      for (const json& p : d.at("parts")) m.parts.push_back(z_slab_part_from_json(p, m.shape));
      m.procs.p = {1, 1, static_cast<int>(m.parts.size())};
    }
    if (integer_at(d, "ranks") != static_cast<int64_t>(m.parts.size())) {
      return corrupt("manifest: the number of ranks differs from the parts listed");
    }
    m.history = internal::read_history(j);
  } catch (const std::exception& e) {
    return corrupt(std::string("manifest is missing a field or has a wrong type: ") + e.what());
  }
  DG_RETURN_IF_ERROR(check_decomposition(m).with_context("manifest"));
  DG_RETURN_IF_ERROR(confine_parts(&m).with_context("manifest"));
  return m;
}

bool is_distributed_grid(const std::string& dir) {
  auto text = internal::read_own_file(internal::join_path(dir, kManifestName));
  if (!text.ok()) return false;
  const json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("format", "") == kFormatName;
}

Result<DistributedManifest> distributed_manifest_in(std::string_view text, const std::string& dir) {
  DG_ASSIGN_OR_RETURN(DistributedManifest m, DistributedManifest::from_json(text));
  m.dir = dir;
  for (PartInfo& p : m.parts) {  // (parts without stores are beside the manifest, confine_parts)
    if (p.stores.empty()) p.dir = internal::join_path(dir, p.dir);
  }
  return m;
}

Result<DistributedManifest> read_distributed_manifest(const std::string& dir) {
  const std::string path = internal::join_path(dir, kManifestName);
  DG_ASSIGN_OR_RETURN(std::string text, internal::read_own_file(path));
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.value("format", "") == "deepgrid-grid") {  // (named here with the fix)
    return invalid_argument(dir + " is a serial grid; run the command without mpirun, or split " +
                            "it over the ranks first with 'mpirun -n P deepgrid split " + dir +
                            " NEW_DIR'");
  }
  auto m = distributed_manifest_in(text, dir);
  if (!m.ok()) return m.status().with_context(path);
  return m;
}

Status write_distributed_manifest(const std::string& dir, const DistributedManifest& m) {
  return internal::write_file_atomic(dir, kManifestName, m.to_json());
}

std::string part_directory(const std::string& dir, const std::string& id, int rank,
                           const std::vector<std::string>& stores) {
  return internal::join_path(
      stores.empty() ? internal::absolute_path(dir) : internal::normal_store_path(stores.front()),
      internal::part_name(id, rank));
}

Result<Grid> open_part_as_is(const DistributedManifest& m, int rank, Grid::Mode mode) {
  const PartInfo& info = m.parts[static_cast<size_t>(rank)];
  auto opened = Grid::open(info.dir, mode);
  if (!opened.ok()) return opened.status().with_context("part " + std::to_string(rank));
  Grid part = std::move(opened).value();
  const Manifest& pm = part.manifest();
  const Shape expected = info.shape();
  if (pm.shape != expected || pm.dtype != m.dtype || pm.fields != m.fields) {
    return corrupt("part " + std::to_string(rank) + " in " + info.dir + " holds " +
                   pm.shape.to_string() + " " + std::string(dtype_name(pm.dtype)) + " of " +
                   std::to_string(pm.components()) + " component(s) but the distributed " +
                   "manifest expects " + expected.to_string() + " " +
                   std::string(dtype_name(m.dtype)) + " of " + std::to_string(m.components()) +
                   "; the grid is damaged (restore the part from a backup)");
  }
  return part;
}

Result<Grid> open_part(const DistributedManifest& m, int rank, Grid::Mode mode) {
  DG_ASSIGN_OR_RETURN(Grid part, open_part_as_is(m, rank, mode));
  if (!part.interrupted_sweep().empty() || part.manifest().step != m.step) {
    const std::string ranks = std::to_string(m.ranks());
    return corrupt("part " + std::to_string(rank) + " in " + part.dir() + " is at time step " +
                   std::to_string(part.manifest().step) +
                   (part.interrupted_sweep().empty()
                        ? ""
                        : " (interrupted in an in-place " + part.interrupted_sweep() + ")") +
                   " but the grid is at step " + std::to_string(m.step) +
                   ": a run stopped part-way; finish it with 'mpirun -n " + ranks +
                   " deepgrid run " + m.dir + " --resume'");
  }
  return part;
}

Status read_rect(const Grid& part, int64_t p, const Block& rect, internal::ScratchPages* plane,
                 std::byte* packed) {
  const internal::PlaneFormat format = internal::plane_format(part.manifest());
  std::byte* values = plane->hold(format.bytes());
  if (values == nullptr) return Status(ErrorCode::kResource, "out of memory for a plane");
  DG_RETURN_IF_ERROR(part.read_planes(p, 1, values));
  internal::copy_rect(values, format, rect, packed, internal::RectCopy::kToPacked);
  return Status::Ok();
}

Status read_block_planes(const Grid& part, const PartInfo& info, const RectConsumer& consume) {
  const Block local = info.to_local(info.block);
  internal::ScratchPages plane;
  std::vector<std::byte> packed(internal::plane_format(part.manifest()).rect_bytes(local));
  for (int64_t z = info.block[kAxisZ].lo; z < info.block[kAxisZ].hi; ++z) {
    DG_RETURN_IF_ERROR(read_rect(part, z - info.origin(kAxisZ), local, &plane, packed.data()));
    DG_RETURN_IF_ERROR(consume(z, packed.data()));
  }
  return Status::Ok();
}

namespace {

// The images of `block` shifted by whole grid extents (periodic grids) that may meet `region`:
// each axis's shift, in grid extents, from `lo` to `hi`.
struct Images {
  std::array<int64_t, 3> lo{}, hi{};
};

Images images_meeting(const Block& region, const Shape& shape, bool periodic) {
  Images im;
  if (!periodic) return im;
  const int64_t n[] = {shape.nx, shape.ny, shape.nz};
  for (size_t a = 0; a < 3; ++a) {
    im.lo[a] = floor_div(region[static_cast<int>(a)].lo, n[a]);
    im.hi[a] = floor_div(region[static_cast<int>(a)].hi - 1, n[a]);
  }
  return im;
}

Block shifted(const Block& b, const std::array<int64_t, 3>& by) {
  Block out = b;
  for (int a = 0; a < 3; ++a) {
    out[a].lo += by[static_cast<size_t>(a)];
    out[a].hi += by[static_cast<size_t>(a)];
  }
  return out;
}

// The 26 halo regions around a part's block (faces, edges, corners; empty ones included), in
// global coordinates, z slowest: along each axis below the block, the block, or above it.
std::vector<Block> halo_regions(const PartInfo& p) {
  const Block held = p.held();
  std::vector<Block> out;
  for (int iz = 0; iz < 3; ++iz) {
    for (int iy = 0; iy < 3; ++iy) {
      for (int ix = 0; ix < 3; ++ix) {
        if (ix == 1 && iy == 1 && iz == 1) continue;  // the block itself
        const int side[] = {ix, iy, iz};
        Block r;
        for (int a = 0; a < 3; ++a) {
          const Span s[] = {{held[a].lo, p.block[a].lo}, p.block[a], {p.block[a].hi, held[a].hi}};
          r[a] = s[side[a]];
        }
        out.push_back(r);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<BoxTransfer> halo_transfers(const std::vector<PartInfo>& parts, const Shape& shape,
                                        bool periodic) {
  const int64_t n[] = {shape.nx, shape.ny, shape.nz};
  std::vector<BoxTransfer> out;
  for (size_t to = 0; to < parts.size(); ++to) {
    const PartInfo& dst = parts[to];
    for (const Block& region : halo_regions(dst)) {
      if (region.empty()) continue;
      const Images im = images_meeting(region, shape, periodic);
      for (size_t from = 0; from < parts.size(); ++from) {
        const PartInfo& src = parts[from];
        for (int64_t sz = im.lo[2]; sz <= im.hi[2]; ++sz) {
          for (int64_t sy = im.lo[1]; sy <= im.hi[1]; ++sy) {
            for (int64_t sx = im.lo[0]; sx <= im.hi[0]; ++sx) {
              const std::array<int64_t, 3> by{sx * n[0], sy * n[1], sz * n[2]};
              const Block meet = intersect(region, shifted(src.block, by));
              if (meet.empty()) continue;
              out.push_back({static_cast<int>(from),
                             src.to_local(shifted(meet, {-by[0], -by[1], -by[2]})),
                             static_cast<int>(to), dst.to_local(meet)});
            }
          }
        }
      }
    }
  }
  return out;
}

namespace {

// The part's coordinates along axis a of the points it holds that stand for global index g.
std::vector<int64_t> local_copies(const PartInfo& part, int a, int64_t g, int64_t n,
                                  bool periodic) {
  const int64_t origin = part.origin(a), held = part.held().size(a);
  std::vector<int64_t> out;
  if (!periodic) {
    if (g - origin >= 0 && g - origin < held) out.push_back(g - origin);
    return out;
  }
  for (int64_t l = ((g - origin) % n + n) % n; l < held; l += n) out.push_back(l);
  return out;
}

}  // namespace

ResolvedProbes part_probes(const ResolvedProbes& global, const PartInfo& part, const Shape& shape,
                           bool periodic, std::vector<int64_t>* receiver_index) {
  ResolvedProbes out;
  for (size_t i = 0; i < global.sources.size(); ++i) {
    const ProbePoint& q = global.sources[i];
    for (int64_t z : local_copies(part, kAxisZ, q.z, shape.nz, periodic)) {
      for (int64_t y : local_copies(part, kAxisY, q.y, shape.ny, periodic)) {
        for (int64_t x : local_copies(part, kAxisX, q.x, shape.nx, periodic)) {
          out.sources.push_back({q.component, x, y, z});
          out.source_specs.push_back(global.source_specs[i]);
        }
      }
    }
  }
  receiver_index->clear();
  for (size_t r = 0; r < global.receivers.size(); ++r) {
    const ProbePoint& q = global.receivers[r];
    if (!part.block.contains(q.x, q.y, q.z)) continue;
    out.receivers.push_back({q.component, q.x - part.origin(kAxisX), q.y - part.origin(kAxisY),
                             q.z - part.origin(kAxisZ)});
    receiver_index->push_back(static_cast<int64_t>(r));
  }
  index_by_plane(&out);
  return out;
}

std::string describe_part(const DistributedManifest& m, int rank) {
  const PartInfo& p = m.parts[static_cast<size_t>(rank)];
  std::string halo;
  for (int a = 0; a < 3; ++a) {
    halo += std::string(a > 0 ? ", " : "") + kAxisKey[a] + " " +
            std::to_string(p.halo.below[static_cast<size_t>(a)]) + "/" +
            std::to_string(p.halo.above[static_cast<size_t>(a)]);
  }
  std::string line = "rank " + std::to_string(rank) + ": block " + p.block.to_string() + ", halo " +
                     halo + " (below/above), in " + p.dir;
  auto part = open_part(m, rank, Grid::Mode::kReadOnly);
  if (!part.ok()) return line + ": " + part.status().message();
  return line + ": consistent, " + std::to_string(part->manifest().layout.files.size()) +
         " data file(s)" + (part->direct_io() ? "" : ", no O_DIRECT");
}

Status remove_part(const std::string& part_dir) {
  std::vector<std::string> files;
  {
    DG_ASSIGN_OR_RETURN(Grid part, Grid::open(part_dir, Grid::Mode::kReadWrite));
    for (size_t f = 0; f < part.manifest().layout.files.size(); ++f) {
      files.push_back(part.file_path(static_cast<int>(f)));
    }
  }
  std::error_code ec;
  for (const std::string& f : files) {
    if (!std::filesystem::remove(f, ec) && ec) return errno_status(ec.value(), "remove", f);
  }
  std::filesystem::remove_all(part_dir, ec);
  if (ec) return errno_status(ec.value(), "remove", part_dir);
  return Status::Ok();
}

Status read_distributed_planes(const DistributedManifest& m, bool verify,
                               const io::PlaneConsumer& consume) {
  const int layer = m.procs.p[0] * m.procs.p[1];  // the ranks of one z-layer of blocks
  const internal::PlaneFormat format = internal::plane_format(m.shape, m.dtype, m.components());
  std::vector<std::byte> global(format.bytes());
  internal::ScratchPages plane;
  std::vector<std::byte> packed;
  for (int first = 0; first < m.ranks(); first += layer) {
    std::vector<Grid> parts;
    for (int r = first; r < first + layer; ++r) {
      DG_ASSIGN_OR_RETURN(Grid part, open_part(m, r, Grid::Mode::kReadOnly));
      if (verify) DG_RETURN_IF_ERROR(part.enable_verification());
      parts.push_back(std::move(part));
    }
    const Span zs = m.parts[static_cast<size_t>(first)].block[kAxisZ];
    for (int64_t z = zs.lo; z < zs.hi; ++z) {
      for (int r = first; r < first + layer; ++r) {
        const PartInfo& info = m.parts[static_cast<size_t>(r)];
        packed.resize(format.rect_bytes(info.block));
        DG_RETURN_IF_ERROR(read_rect(parts[static_cast<size_t>(r - first)], z - info.origin(kAxisZ),
                                     info.to_local(info.block), &plane, packed.data()));
        internal::copy_rect(global.data(), format, info.block, packed.data(),
                            internal::RectCopy::kFromPacked);
      }
      DG_RETURN_IF_ERROR(consume(z, global.data()));
    }
  }
  return Status::Ok();
}

}  // namespace deepgrid
