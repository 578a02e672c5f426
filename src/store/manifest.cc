// The manifest (store.h): its JSON form, the checks a manifest read from disk must pass, and
// the layout of a grid's planes in its data files.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "deepgrid/store.h"
#include "store/grid_files.h"
#include "store/grid_lock.h"
#include "store/grid_paths.h"
#include "store/json_fields.h"

namespace deepgrid {

using internal::expected_file_bytes;
using internal::integer_at;
using nlohmann::json;

namespace {

constexpr const char* kFormatName = "deepgrid-grid";

// Spare slots beyond nz a grid may have (growing them for deep sweeps needs at most
// 64 levels * radius 4 + 3 blocks of 64).
constexpr int64_t kMaxSparePlanes = 1024;

}  // namespace

namespace {

// The end of the last of `units` planes (of `stride` bytes, `per_chunk` to a chunk, chunk c in
// file c % files) that file f holds.
int64_t striped_file_bytes(int64_t units, int64_t per_chunk, int64_t stride, int64_t files,
                           size_t f) {
  const int64_t chunks = (units + per_chunk - 1) / per_chunk;
  int64_t bytes = 0;
  for (int64_t c = static_cast<int64_t>(f); c < chunks; c += files) {
    const int64_t planes = std::min(per_chunk, units - c * per_chunk);
    bytes = (c / files) * per_chunk * stride + planes * stride;
  }
  return bytes;
}

PlaneLocation striped_location(int64_t unit, int64_t per_chunk, int64_t stride, int64_t files) {
  const int64_t chunk = unit / per_chunk;
  return {static_cast<int>(chunk % files),
          (chunk / files) * per_chunk * stride + (unit % per_chunk) * stride};
}

}  // namespace

int64_t internal::expected_file_bytes(const Shape& s, const Layout& l, size_t f) {
  return striped_file_bytes(s.nz + l.spare_planes, l.planes_per_chunk, l.plane_stride,
                            static_cast<int64_t>(l.files.size()), f);
}

int64_t internal::expected_coef_file_bytes(const Shape& s, const Layout& l, size_t f) {
  return striped_file_bytes(s.nz, l.coef_planes_per_chunk, l.coef_stride(),
                            static_cast<int64_t>(l.coef_files.size()), f);
}

bool internal::manifest_names_data_file(const std::string& dir, const std::string& path) {
  auto text = internal::read_own_file(internal::join_path(dir, kManifestName));
  if (!text.ok()) return true;
  auto m = Manifest::from_json(*text);
  return !m.ok() || (!m->layout.files.empty() && m->layout.files[0].path == path);
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int64_t default_spare_planes(int64_t nz) { return std::max<int64_t>(64, (nz + 15) / 16); }

int64_t Manifest::slot_of(int64_t z, int64_t with_base) const { return (z + with_base) % slots(); }

PlaneLocation Manifest::locate_slot(int64_t slot) const {
  return striped_location(slot, layout.planes_per_chunk, layout.plane_stride,
                          static_cast<int64_t>(layout.files.size()));
}

PlaneLocation Manifest::locate_coef(int64_t z) const {
  return striped_location(z, layout.coef_planes_per_chunk, layout.coef_stride(),
                          static_cast<int64_t>(layout.coef_files.size()));
}

int Manifest::component_index(std::string_view name) const {
  if (fields.empty()) return name == "u" ? 0 : -1;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (fields[i] == name) return static_cast<int>(i);
  }
  return -1;
}

PlaneHashing Manifest::plane_hashing() const {
  PlaneHashing h;
  h.components = components();
  h.by_component = checksums_by_component && h.components > 1;
  h.component_bytes = static_cast<size_t>(layout.plane_bytes / h.components);
  return h;
}

std::string_view Manifest::checksum_algorithm() const {
  return plane_hashing().by_component ? kComponentChecksumAlgorithm : kChecksumAlgorithm;
}

std::string Manifest::to_json() const {
  auto files_json = [](const std::vector<DataFile>& list) {
    json files = json::array();
    for (const auto& f : list) files.push_back({{"path", f.path}, {"bytes", f.bytes}});
    return files;
  };
  json j = internal::grid_header_json(kFormatName, version, {id, shape, dtype, step});
  j["base"] = base;
  if (!stores.empty()) j["stores"] = stores;
  j["layout"] = {{"plane_bytes", layout.plane_bytes},
                 {"plane_stride", layout.plane_stride},
                 {"planes_per_chunk", layout.planes_per_chunk},
                 {"spare_planes", layout.spare_planes},
                 {"files", files_json(layout.files)}};
  if (has_coef_files()) {
    j["layout"]["coef_bytes"] = layout.coef_bytes;
    j["layout"]["coef_planes_per_chunk"] = layout.coef_planes_per_chunk;
    j["layout"]["coef_files"] = files_json(layout.coef_files);
  }
  j["history"] = internal::history_json(history);
  internal::put_fields(&j, fields, scheme);
  if (checksum_generation > 0) {
    j["checksums"] = {{"algorithm", checksum_algorithm()},
                      {"generation", checksum_generation},
                      {"file", checksum_file_name(checksum_generation)}};
  }
  return j.dump(2) + "\n";
}

Result<Manifest> Manifest::from_json(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return corrupt("manifest is not valid JSON (truncated or damaged); restore it from a backup");
  }
  Manifest m;
  try {
    if (j.value("format", "") != kFormatName) {
      return corrupt("manifest is not a deepgrid grid manifest (format field missing)");
    }
    m.version = static_cast<int>(std::clamp<int64_t>(integer_at(j, "version"), -1, 1 << 20));
    if (m.version > kManifestVersion) {
      return unsupported("grid was written by a newer deepgrid (format version " +
                         std::to_string(m.version) + "; this one reads up to " +
                         std::to_string(kManifestVersion) + "); upgrade deepgrid");
    }
    if (m.version < 1) return corrupt("manifest has invalid format version");
    DG_ASSIGN_OR_RETURN(const internal::GridHeader header, internal::read_grid_header(j));
    m.id = header.id;
    m.shape = header.shape;
    m.dtype = header.dtype;
    m.step = header.step;
    const json& l = j.at("layout");
    m.layout.plane_bytes = integer_at(l, "plane_bytes");
    m.layout.plane_stride = integer_at(l, "plane_stride");
    m.layout.planes_per_chunk = integer_at(l, "planes_per_chunk");
    if (m.version >= 3) {
      m.layout.spare_planes = integer_at(l, "spare_planes");
      m.base = integer_at(j, "base");
    }
    auto read_files = [](const json& list, std::vector<DataFile>* files) {
      for (const auto& f : list) {
        files->push_back({f.at("path").get<std::string>(), integer_at(f, "bytes")});
      }
    };
    read_files(l.at("files"), &m.layout.files);
    if (m.version >= 5 && l.contains("coef_bytes")) {
      m.layout.coef_bytes = integer_at(l, "coef_bytes");
      m.layout.coef_planes_per_chunk = integer_at(l, "coef_planes_per_chunk");
      read_files(l.at("coef_files"), &m.layout.coef_files);
    }
    // (recorded since 2026-11-26; before, the data files' own directories)
    m.stores = j.contains("stores") ? j.at("stores").get<std::vector<std::string>>()
                                    : internal::stores_of_files(m.layout.files);
    if (const auto c = j.find("checksums"); c != j.end()) {
      const auto algorithm = c->at("algorithm").get<std::string>();
      if (algorithm != kChecksumAlgorithm && algorithm != kComponentChecksumAlgorithm) {
        return unsupported(
            "grid's checksums use an algorithm this deepgrid does not know; "
            "upgrade deepgrid");
      }
      m.checksums_by_component = algorithm == kComponentChecksumAlgorithm;
      m.checksum_generation = integer_at(*c, "generation");
      if (m.checksum_generation < 1) return corrupt("manifest has an invalid checksum generation");
    }
    internal::read_fields(j, &m.fields, &m.scheme);
    m.history = internal::read_history(j);
  } catch (const std::exception& e) {  // json::exception, or integer_at's
    return corrupt(std::string("manifest is missing a field or has a wrong type: ") + e.what());
  }
  DG_RETURN_IF_ERROR(internal::check_data_files(m.id, m.stores, m.layout.files));
  DG_RETURN_IF_ERROR(internal::check_coef_files(m.id, m.stores, m.layout.coef_files));
  Status shape_ok = validate_shape(m.shape);
  if (!shape_ok.ok()) return corrupt("manifest: " + shape_ok.message());
  // planes_per_chunk and the spare slots are bounded before anything multiplies them.
  if (m.layout.spare_planes < 0 ||
      m.layout.spare_planes > std::max<int64_t>(m.shape.nz, kMaxSparePlanes)) {
    return corrupt("manifest layout has an invalid spare_planes");
  }
  if (m.layout.planes_per_chunk < 1 || m.layout.planes_per_chunk > m.slots()) {
    return corrupt("manifest layout has an invalid planes_per_chunk");
  }
  if (m.base < 0 || m.base >= m.slots()) return corrupt("manifest has an invalid base");
  // (the coefficients are whole components: coef_bytes is checked against the layout below)
  const int64_t component_bytes = m.layout.plane_bytes / std::max(1, m.components());
  const int coefficients = component_bytes > 0 && m.layout.coef_bytes > 0 &&
                                   m.layout.coef_bytes % component_bytes == 0 &&
                                   m.layout.coef_bytes / component_bytes < m.components()
                               ? static_cast<int>(m.layout.coef_bytes / component_bytes)
                               : 0;
  DG_ASSIGN_OR_RETURN(Layout expected,
                      plan_layout(m.shape, m.dtype, m.layout.files.size(), kDirectIoAlignment,
                                  m.layout.spare_planes, m.components(), coefficients));
  if (m.step < 0 || m.layout.files.empty() || m.layout.plane_bytes != expected.plane_bytes ||
      m.layout.plane_stride != expected.plane_stride ||
      m.layout.coef_bytes != expected.coef_bytes) {
    return corrupt("manifest layout is inconsistent with its shape and dtype");
  }
  if (m.has_coef_files() &&
      (m.layout.coef_files.size() != m.layout.files.size() || m.layout.coef_planes_per_chunk < 1 ||
       m.layout.coef_planes_per_chunk > m.shape.nz)) {
    return corrupt("manifest layout has invalid coefficient files");
  }
  for (size_t f = 0; f < m.layout.files.size(); ++f) {
    if (m.layout.files[f].bytes != expected_file_bytes(m.shape, m.layout, f)) {
      return corrupt("manifest lists a wrong size for data file " + m.layout.files[f].path);
    }
  }
  for (size_t f = 0; f < m.layout.coef_files.size(); ++f) {
    if (m.layout.coef_files[f].bytes != internal::expected_coef_file_bytes(m.shape, m.layout, f)) {
      return corrupt("manifest lists a wrong size for coefficient file " +
                     m.layout.coef_files[f].path);
    }
  }
  return m;
}

Result<Layout> plan_layout(const Shape& shape, DType dtype, size_t n_stores,
                           int64_t chunk_target_bytes, int64_t spare_planes, int components,
                           int coefficient_components) {
  DG_RETURN_IF_ERROR(validate_shape(shape));
  Layout l;
  int64_t plane_bytes = 0;
  if (components < 1 ||
      !checked_mul(shape.plane_points(), static_cast<int64_t>(dtype_size(dtype)) * components,
                   &plane_bytes)) {
    return invalid_argument("shape " + shape.to_string() + " is too large");
  }
  l.plane_bytes = plane_bytes;
  const int64_t component_bytes = plane_bytes / components;
  if (coefficient_components > 0 && coefficient_components < components) {
    l.coef_bytes = component_bytes * coefficient_components;
  }
  l.plane_stride = round_up(l.ring_bytes(), kDirectIoAlignment);
  int64_t ring_bytes = 0;
  if (spare_planes < 0 || spare_planes > std::max<int64_t>(shape.nz, kMaxSparePlanes) ||
      !checked_mul(shape.nz + spare_planes, l.plane_stride, &ring_bytes)) {
    return invalid_argument("shape " + shape.to_string() + " with " + std::to_string(spare_planes) +
                            " spare planes is too large");
  }
  l.spare_planes = spare_planes;
  l.planes_per_chunk = std::clamp<int64_t>(chunk_target_bytes / l.plane_stride, 1,
                                           std::max<int64_t>(1, shape.nz + spare_planes));
  const size_t files = std::max<size_t>(1, n_stores);
  l.files.resize(files);
  for (size_t f = 0; f < files; ++f) l.files[f].bytes = expected_file_bytes(shape, l, f);
  if (l.coef_bytes > 0) {
    l.coef_planes_per_chunk = std::clamp<int64_t>(chunk_target_bytes / l.coef_stride(), 1,
                                                  std::max<int64_t>(1, shape.nz));
    l.coef_files.resize(files);
    for (size_t f = 0; f < files; ++f) {
      l.coef_files[f].bytes = internal::expected_coef_file_bytes(shape, l, f);
    }
  }
  return l;
}

}  // namespace deepgrid
