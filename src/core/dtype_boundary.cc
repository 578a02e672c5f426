#include <cmath>
#include <cstdlib>
#include <string>

#include "deepgrid/boundary.h"
#include "deepgrid/dtype.h"

namespace deepgrid {

std::string_view dtype_name(DType t) { return t == DType::kF32 ? "f32" : "f64"; }

Result<DType> parse_dtype(std::string_view text) {
  if (text == "f32" || text == "float32") return DType::kF32;
  if (text == "f64" || text == "float64") return DType::kF64;
  return invalid_argument("unknown dtype '" + std::string(text) + "'; use f32 or f64");
}

std::string Boundary::to_string() const {
  switch (kind) {
    case Kind::kNeumann:
      return "neumann";
    case Kind::kPeriodic:
      return "periodic";
    case Kind::kDirichlet:
      break;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "dirichlet:%.17g", value);
  return buf;
}

Result<Boundary> parse_boundary(std::string_view text) {
  if (text == "neumann") return Boundary{Boundary::Kind::kNeumann, 0};
  if (text == "periodic") return Boundary{Boundary::Kind::kPeriodic, 0};
  if (text == "dirichlet") return Boundary{Boundary::Kind::kDirichlet, 0};
  constexpr std::string_view kPrefix = "dirichlet:";
  if (text.substr(0, kPrefix.size()) == kPrefix) {
    std::string num(text.substr(kPrefix.size()));
    char* end = nullptr;
    double v = std::strtod(num.c_str(), &end);
    if (!num.empty() && end == num.c_str() + num.size() && std::isfinite(v)) {
      return Boundary{Boundary::Kind::kDirichlet, v};
    }
    return invalid_argument("boundary '" + std::string(text) +
                            "' has no finite value after 'dirichlet:'; e.g. dirichlet:0.5");
  }
  return invalid_argument("unknown boundary '" + std::string(text) +
                          "'; use dirichlet:V, neumann or periodic");
}

}  // namespace deepgrid
