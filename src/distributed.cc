#include "deepgrid/distributed.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "internal/file_util.h"
#include "internal/json_fields.h"

namespace deepgrid {

using internal::integer_at;
using nlohmann::json;

namespace {

constexpr const char* kManifestName = "manifest.json";
constexpr const char* kFormatName = "deepgrid-distributed";

Status check_decomposition(const DistributedManifest& m) {
  DG_RETURN_IF_ERROR(validate_shape(m.shape));
  if (m.parts.empty()) return corrupt("the manifest lists no parts");
  int64_t z = 0;
  for (const PartInfo& p : m.parts) {
    if (p.slab.z0 != z || p.slab.z1 <= p.slab.z0 || p.halo.below < 0 || p.halo.above < 0 ||
        p.dir.empty()) {
      return corrupt("the parts' slabs do not tile the grid's z-planes in order");
    }
    z = p.slab.z1;
  }
  if (z != m.shape.nz) return corrupt("the parts' slabs do not cover the grid's z-planes");
  if (m.step < 0) return corrupt("the manifest has a negative time step");
  return Status::Ok();
}

}  // namespace

std::vector<Slab> DistributedManifest::slabs() const {
  std::vector<Slab> out;
  for (const PartInfo& p : parts) out.push_back(p.slab);
  return out;
}

std::string DistributedManifest::to_json() const {
  json parts_json = json::array();
  for (size_t r = 0; r < parts.size(); ++r) {
    const PartInfo& p = parts[r];
    parts_json.push_back({{"rank", r},
                          {"z0", p.slab.z0},
                          {"z1", p.slab.z1},
                          {"halo_below", p.halo.below},
                          {"halo_above", p.halo.above},
                          {"dir", p.dir},
                          {"stores", p.stores}});
  }
  json hist = json::array();
  for (const auto& h : history) {
    json details = json::parse(h.details, nullptr, false);
    if (details.is_discarded()) details = json::object();
    hist.push_back({{"date", h.date}, {"command", h.command}, {"details", details}});
  }
  const json j = {
      {"format", kFormatName},
      {"version", version},
      {"id", id},
      {"shape", {{"nx", shape.nx}, {"ny", shape.ny}, {"nz", shape.nz}}},
      {"dtype", dtype_name(dtype)},
      {"byte_order", "little"},
      {"step", step},
      {"decomposition", {{"axis", "z"}, {"ranks", parts.size()}, {"parts", std::move(parts_json)}}},
      {"history", std::move(hist)}};
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
    const json& d = j.at("decomposition");
    if (d.at("axis").get<std::string>() != "z") {
      return unsupported("grid is decomposed along an axis this deepgrid does not know");
    }
    for (const json& p : d.at("parts")) {
      m.parts.push_back({{integer_at(p, "z0"), integer_at(p, "z1")},
                         {integer_at(p, "halo_below"), integer_at(p, "halo_above")},
                         p.at("dir").get<std::string>(),
                         p.at("stores").get<std::vector<std::string>>()});
    }
    if (integer_at(d, "ranks") != static_cast<int64_t>(m.parts.size())) {
      return corrupt("manifest: the number of ranks differs from the parts listed");
    }
    for (const auto& h : j.value("history", json::array())) {
      m.history.push_back(
          {h.value("date", ""), h.value("command", ""), h.value("details", json::object()).dump()});
    }
  } catch (const std::exception& e) {
    return corrupt(std::string("manifest is missing a field or has a wrong type: ") + e.what());
  }
  DG_RETURN_IF_ERROR(check_decomposition(m).with_context("manifest"));
  return m;
}

bool is_distributed_grid(const std::string& dir) {
  auto text = internal::read_small_file(internal::join_path(dir, kManifestName));
  if (!text.ok()) return false;
  const json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.value("format", "") == kFormatName;
}

Result<DistributedManifest> read_distributed_manifest(const std::string& dir) {
  const std::string path = internal::join_path(dir, kManifestName);
  DG_ASSIGN_OR_RETURN(std::string text, internal::read_small_file(path));
  auto m = DistributedManifest::from_json(text);
  if (!m.ok()) return m.status().with_context(path);
  return m;
}

Status write_distributed_manifest(const std::string& dir, const DistributedManifest& m) {
  return internal::write_file_atomic(dir, kManifestName, m.to_json());
}

std::string part_directory(const std::string& dir, const std::string& id, int rank,
                           const std::vector<std::string>& stores) {
  const std::string name = "deepgrid-" + id + ".part." + std::to_string(rank);
  return internal::join_path(internal::absolute_path(stores.empty() ? dir : stores.front()), name);
}

Result<Grid> open_part(const DistributedManifest& m, int rank, Grid::Mode mode) {
  const PartInfo& info = m.parts[static_cast<size_t>(rank)];
  auto opened = Grid::open(info.dir, mode);
  if (!opened.ok()) return opened.status().with_context("part " + std::to_string(rank));
  Grid part = std::move(opened).value();
  const Manifest& pm = part.manifest();
  const Shape expected{m.shape.nx, m.shape.ny, info.planes()};
  if (pm.shape != expected || pm.dtype != m.dtype) {
    return corrupt("part " + std::to_string(rank) + " in " + info.dir + " holds " +
                   pm.shape.to_string() + " " + std::string(dtype_name(pm.dtype)) +
                   " but the distributed manifest expects " + expected.to_string() + " " +
                   std::string(dtype_name(m.dtype)) +
                   "; the grid is damaged (restore the part from a backup)");
  }
  if (!part.interrupted_sweep().empty() || pm.step != m.step) {
    return corrupt("part " + std::to_string(rank) + " in " + info.dir + " is at time step " +
                   std::to_string(pm.step) +
                   (part.interrupted_sweep().empty()
                        ? ""
                        : " (interrupted in an in-place " + part.interrupted_sweep() + ")") +
                   " but the grid is at step " + std::to_string(m.step) +
                   ": a run stopped part-way; restore the grid from a backup");
  }
  return part;
}

Status read_slab_planes(const Grid& part, const PartInfo& info, const io::PlaneConsumer& consume) {
  const int64_t first = info.halo.below;
  return io::read_plane_range(
      part, first, first + info.slab.planes(),
      [&](int64_t p, const void* values) { return consume(info.global_plane(p), values); });
}

std::vector<PlaneTransfer> halo_transfers(const std::vector<PartInfo>& parts, int64_t nz,
                                          bool periodic) {
  std::vector<Slab> slabs;
  for (const PartInfo& p : parts) slabs.push_back(p.slab);
  std::vector<PlaneTransfer> out;
  for (size_t to = 0; to < parts.size(); ++to) {
    const PartInfo& dst = parts[to];
    for (int64_t p = 0; p < dst.planes(); ++p) {
      const int64_t g = dst.global_plane(p);
      if (g >= dst.slab.z0 && g < dst.slab.z1) continue;  // its own plane, not a halo
      const int64_t source = wrap_plane(g, nz, periodic);
      const int from = owner_of(slabs, source);
      const PartInfo& src = parts[static_cast<size_t>(from)];
      out.push_back({from, src.halo.below + source - src.slab.z0, static_cast<int>(to), p});
    }
  }
  return out;
}

std::string describe_part(const DistributedManifest& m, int rank) {
  const PartInfo& p = m.parts[static_cast<size_t>(rank)];
  std::string line = "rank " + std::to_string(rank) + ": planes [" + std::to_string(p.slab.z0) +
                     ", " + std::to_string(p.slab.z1) + "), halo " + std::to_string(p.halo.below) +
                     " below, " + std::to_string(p.halo.above) + " above, in " + p.dir;
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
  for (int r = 0; r < m.ranks(); ++r) {
    DG_ASSIGN_OR_RETURN(Grid part, open_part(m, r, Grid::Mode::kReadOnly));
    if (verify) DG_RETURN_IF_ERROR(part.enable_verification());
    DG_RETURN_IF_ERROR(read_slab_planes(part, m.parts[static_cast<size_t>(r)], consume));
  }
  return Status::Ok();
}

}  // namespace deepgrid
