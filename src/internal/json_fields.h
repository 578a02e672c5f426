// internal: reading fields of deepgrid's JSON files (manifests, records) with nlohmann::json.
// The functions throw (json::exception, std::invalid_argument) on a missing field or a wrong
// type; callers turn that into a kCorrupt status naming their file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "deepgrid/dtype.h"
#include "deepgrid/geometry.h"
#include "deepgrid/status.h"

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
  const nlohmann::json& s = j.at("shape");
  h.shape = {integer_at(s, "nx"), integer_at(s, "ny"), integer_at(s, "nz")};
  auto dt = parse_dtype(j.at("dtype").get<std::string>());
  if (!dt.ok()) return corrupt("manifest: " + dt.status().message());
  h.dtype = *dt;
  h.step = integer_at(j, "step");
  return h;
}

}  // namespace deepgrid::internal
