// internal: the fields every deepgrid manifest (serial or distributed) shares, read and written
// with nlohmann::json. Readers throw (json::exception, std::invalid_argument) on a missing
// field or a wrong type; callers turn that into a kCorrupt status naming their file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "deepgrid/dtype.h"
#include "deepgrid/geometry.h"
#include "deepgrid/status.h"
#include "deepgrid/store.h"
#include "store/grid_paths.h"

namespace deepgrid::internal {

// An integer field. Floats are refused rather than converted: converting an out-of-range one
// is undefined behaviour.
inline int64_t integer_at(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer()) throw std::invalid_argument(std::string(key) + " is not an integer");
  return v.get<int64_t>();
}

// What every grid manifest (serial or distributed) starts with.
struct GridHeader {
  std::string id;
  Shape shape;
  DType dtype = DType::kF32;
  int64_t step = 0;
};

inline Result<GridHeader> read_grid_header(const nlohmann::json& j) {
  GridHeader h;
  h.id = j.at("id").get<std::string>();
  DG_RETURN_IF_ERROR(check_grid_id(h.id));
  const nlohmann::json& s = j.at("shape");
  h.shape = {integer_at(s, "nx"), integer_at(s, "ny"), integer_at(s, "nz")};
  auto dt = parse_dtype(j.at("dtype").get<std::string>());
  if (!dt.ok()) return corrupt("manifest: " + dt.status().message());
  h.dtype = *dt;
  h.step = integer_at(j, "step");
  return h;
}

// The header's fields with the manifest's format name and version.
inline nlohmann::json grid_header_json(const char* format, int version, const GridHeader& h) {
  return {{"format", format},
          {"version", version},
          {"id", h.id},
          {"shape", {{"nx", h.shape.nx}, {"ny", h.shape.ny}, {"nz", h.shape.nz}}},
          {"dtype", dtype_name(h.dtype)},
          {"byte_order", "little"},
          {"step", h.step}};
}

// A manifest's history: details are JSON objects (text that does not parse becomes {}).
inline nlohmann::json history_json(const std::vector<HistoryEntry>& history) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& h : history) {
    nlohmann::json details = nlohmann::json::parse(h.details, nullptr, false);
    if (details.is_discarded()) details = nlohmann::json::object();
    out.push_back({{"date", h.date}, {"command", h.command}, {"details", details}});
  }
  return out;
}

inline std::vector<HistoryEntry> read_history(const nlohmann::json& j) {
  std::vector<HistoryEntry> out;
  for (const auto& h : j.value("history", nlohmann::json::array())) {
    out.push_back({h.value("date", ""), h.value("command", ""),
                   h.value("details", nlohmann::json::object()).dump()});
  }
  return out;
}

// A grid's fields and scheme (Manifest::fields, Manifest::scheme): written only when there are
// any, so that grids of one field keep their older format.
inline void put_fields(nlohmann::json* j, const std::vector<std::string>& fields,
                       const std::string& scheme) {
  if (!fields.empty()) (*j)["fields"] = fields;
  if (!scheme.empty()) (*j)["scheme"] = nlohmann::json::parse(scheme, nullptr, false);
}

inline void read_fields(const nlohmann::json& j, std::vector<std::string>* fields,
                        std::string* scheme) {
  for (const auto& f : j.value("fields", nlohmann::json::array())) {
    fields->push_back(f.get<std::string>());
  }
  if (const auto sc = j.find("scheme"); sc != j.end()) *scheme = sc->dump();
}

}  // namespace deepgrid::internal
