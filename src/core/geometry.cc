#include "deepgrid/geometry.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

namespace deepgrid {
namespace {

Result<int64_t> parse_extent(std::string_view part, std::string_view whole) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
  if (part.empty() || ec == std::errc::result_out_of_range) {
    return invalid_argument("shape '" + std::string(whole) +
                            "' has an extent that is empty or too large; write it as NXxNYxNZ, "
                            "e.g. 256x256x256");
  }
  if (ec != std::errc() || ptr != part.data() + part.size()) {
    return invalid_argument("shape '" + std::string(whole) + "' has a non-numeric extent '" +
                            std::string(part) + "'; write it as NXxNYxNZ, e.g. 256x256x256");
  }
  return v;
}

}  // namespace

std::string Shape::to_string() const {
  return std::to_string(nx) + "x" + std::to_string(ny) + "x" + std::to_string(nz);
}

bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

Status validate_shape(const Shape& s) {
  if (s.nx < 1 || s.ny < 1 || s.nz < 1) {
    return invalid_argument("shape " + s.to_string() +
                            " has an extent below 1; every extent must "
                            "be a positive integer");
  }
  int64_t plane = 0, total = 0;
  if (!checked_mul(s.nx, s.ny, &plane) || !checked_mul(plane, s.nz, &total) ||
      total > kMaxGridPoints) {
    return invalid_argument("shape " + s.to_string() +
                            " has more than 2^50 points; choose "
                            "smaller extents");
  }
  return Status::Ok();
}

Result<Shape> parse_shape(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = text.find_first_of("xX", start);
    parts.push_back(text.substr(start, pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) {
    return invalid_argument("shape '" + std::string(text) +
                            "' is not NXxNYxNZ or NXxNY; e.g. 256x256x256");
  }
  int64_t e[3] = {1, 1, 1};
  for (size_t i = 0; i < parts.size(); ++i) {
    DG_ASSIGN_OR_RETURN(e[i], parse_extent(parts[i], text));
  }
  Shape shape{e[0], e[1], e[2]};
  DG_RETURN_IF_ERROR(validate_shape(shape));
  return shape;
}

Result<uint64_t> parse_size(std::string_view text) {
  auto bad = [&] {
    return invalid_argument("size '" + std::string(text) +
                            "' is not a size; write e.g. 512MiB, 2GiB or 1073741824");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  std::string number(text.substr(0, i));
  std::string unit(text.substr(i));
  if (number.empty()) return bad();
  char* end = nullptr;
  double v = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !(v >= 0)) return bad();
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  struct Unit {
    const char* name;
    double mult;
  };
  static constexpr Unit kUnits[] = {
      {"", 1},         {"b", 1},       {"k", 0x1p10},   {"ki", 0x1p10},  {"kib", 0x1p10},
      {"m", 0x1p20},   {"mi", 0x1p20}, {"mib", 0x1p20}, {"g", 0x1p30},   {"gi", 0x1p30},
      {"gib", 0x1p30}, {"t", 0x1p40},  {"ti", 0x1p40},  {"tib", 0x1p40}, {"kb", 1e3},
      {"mb", 1e6},     {"gb", 1e9},    {"tb", 1e12}};
  double mult = 0;
  for (const Unit& u : kUnits) {
    if (unit == u.name) mult = u.mult;
  }
  if (mult == 0) return bad();
  double bytes = v * mult;
  if (bytes >= 0x1p63) return bad();
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string format_size(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

}  // namespace deepgrid
