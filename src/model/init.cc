#include "deepgrid/init.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numbers>
#include <string>

namespace deepgrid {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double sine_factor(int64_t i, int64_t n) {
  if (n == 1) return 1.0;
  return std::sin(std::numbers::pi * static_cast<double>(i + 1) / static_cast<double>(n + 1));
}

// Planes of at least this many points are filled by OpenMP's threads (a create of a large grid
// spent three quarters of its time computing initial values on one thread).
constexpr int64_t kPointsPerThread = int64_t{1} << 16;

}  // namespace

std::string InitSpec::to_string() const {
  switch (kind) {
    case Kind::kZero:
      return "zero";
    case Kind::kConst: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "const:%.17g", value);
      return buf;
    }
    case Kind::kRandom:
      return "random:" + std::to_string(seed);
    case Kind::kGaussian:
      return "gaussian";
    case Kind::kSine:
      return "sine";
  }
  return "zero";
}

Result<InitSpec> parse_init(std::string_view text) {
  auto bad = [&] {
    return invalid_argument("unknown --init '" + std::string(text) +
                            "'; use zero, const:V, random:SEED, gaussian or sine");
  };
  if (text == "zero") return InitSpec{InitSpec::Kind::kZero};
  if (text == "gaussian") return InitSpec{InitSpec::Kind::kGaussian};
  if (text == "sine") return InitSpec{InitSpec::Kind::kSine};
  auto colon = text.find(':');
  if (colon == std::string_view::npos) return bad();
  std::string head(text.substr(0, colon)), arg(text.substr(colon + 1));
  char* end = nullptr;
  if (head == "const") {
    double v = std::strtod(arg.c_str(), &end);
    if (arg.empty() || end != arg.c_str() + arg.size() || !std::isfinite(v)) return bad();
    return InitSpec{InitSpec::Kind::kConst, v};
  }
  if (head == "random") {
    unsigned long long s = std::strtoull(arg.c_str(), &end, 10);
    if (arg.empty() || end != arg.c_str() + arg.size() || arg[0] == '-') return bad();
    return InitSpec{InitSpec::Kind::kRandom, 0, s};
  }
  return bad();
}

template <typename T>
void init_plane(const InitSpec& spec, const Shape& s, int64_t z, T* out) {
  const int64_t n = s.plane_points();
  switch (spec.kind) {
    case InitSpec::Kind::kZero:
      std::fill(out, out + n, T(0));
      return;
    case InitSpec::Kind::kConst:
      std::fill(out, out + n, static_cast<T>(spec.value));
      return;
    case InitSpec::Kind::kRandom:
#pragma omp parallel for schedule(static) if (n >= kPointsPerThread)
      for (int64_t i = 0; i < n; ++i) {
        uint64_t h = splitmix64(spec.seed ^ splitmix64(static_cast<uint64_t>(z * n + i)));
        out[i] = static_cast<T>(static_cast<double>(h >> 11) * 0x1p-53);
      }
      return;
    case InitSpec::Kind::kGaussian: {
      int64_t smallest = INT64_MAX;
      for (int64_t e : {s.nx, s.ny, s.nz}) {
        if (e > 1) smallest = std::min(smallest, e);
      }
      const double sigma = smallest == INT64_MAX ? 1.0 : std::max(1.0, smallest / 8.0);
      const double cz = (s.nz - 1) / 2.0, cy = (s.ny - 1) / 2.0, cx = (s.nx - 1) / 2.0;
      // Below this exponent exp() is under half of T's least subnormal and T(exp()) is +0:
      // skipping it gives the same values and spares exp's underflow path (errno and all),
      // which took a sixth of a create's time on large grids.
      const double vanishes = sizeof(T) == sizeof(float) ? -110.0 : -750.0;
#pragma omp parallel for schedule(static) if (n >= kPointsPerThread)
      for (int64_t y = 0; y < s.ny; ++y) {
        for (int64_t x = 0; x < s.nx; ++x) {
          double d2 = (x - cx) * (x - cx) + (y - cy) * (y - cy) + (z - cz) * (z - cz);
          const double e = -d2 / (2 * sigma * sigma);
          out[y * s.nx + x] = e < vanishes ? T(0) : static_cast<T>(std::exp(e));
        }
      }
      return;
    }
    case InitSpec::Kind::kSine: {
      const double fz = sine_factor(z, s.nz);
#pragma omp parallel for schedule(static) if (n >= kPointsPerThread)
      for (int64_t y = 0; y < s.ny; ++y) {
        const double fy = fz * sine_factor(y, s.ny);
        for (int64_t x = 0; x < s.nx; ++x) {
          out[y * s.nx + x] = static_cast<T>(fy * sine_factor(x, s.nx));
        }
      }
      return;
    }
  }
}

template void init_plane<float>(const InitSpec&, const Shape&, int64_t, float*);
template void init_plane<double>(const InitSpec&, const Shape&, int64_t, double*);

}  // namespace deepgrid
