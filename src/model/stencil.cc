#include "deepgrid/stencil.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

namespace deepgrid {
namespace {

struct Shell {
  int d2;    // dx^2 + dy^2 + dz^2 of the shell's points
  double c;  // coefficient of each point in the shell
};

struct PresetDef {
  const char* name;
  bool three_d;
  int radius;
  bool star;  // axis points only (otherwise the full box, filtered by shells)
  std::vector<Shell> shells;
};

// Default coefficients: positive and summing to 1 (a weighted average), so repeated
// application is stable and keeps values within the initial range. All are dyadic, so they
// are exact in f32 and f64. 7pt is explicit heat diffusion with alpha*dt/h^2 = 1/8.
const std::vector<PresetDef>& preset_defs() {
  static const std::vector<PresetDef> defs = {
      {"7pt", true, 1, true, {{0, 1. / 4}, {1, 1. / 8}}},
      {"13pt", true, 2, true, {{0, 1. / 4}, {1, 3. / 32}, {4, 1. / 32}}},
      {"19pt", true, 1, false, {{0, 1. / 4}, {1, 1. / 16}, {2, 1. / 32}}},
      {"25pt",
       true,
       4,
       true,
       {{0, 1. / 4}, {1, 1. / 16}, {4, 1. / 32}, {9, 1. / 64}, {16, 1. / 64}}},
      {"27pt", true, 1, false, {{0, 1. / 8}, {1, 1. / 16}, {2, 1. / 32}, {3, 1. / 64}}},
      {"5pt", false, 1, true, {{0, 1. / 2}, {1, 1. / 8}}},
      {"9pt", false, 1, false, {{0, 1. / 4}, {1, 1. / 8}, {2, 1. / 16}}},
  };
  return defs;
}

std::vector<StencilPoint> preset_points(const PresetDef& def) {
  std::vector<StencilPoint> pts;
  const int r = def.radius;
  const int rz = def.three_d ? r : 0;
  for (int dz = -rz; dz <= rz; ++dz) {
    for (int dy = -r; dy <= r; ++dy) {
      for (int dx = -r; dx <= r; ++dx) {
        int nonzero = (dx != 0) + (dy != 0) + (dz != 0);
        if (def.star && nonzero > 1) continue;
        int d2 = dx * dx + dy * dy + dz * dz;
        for (const Shell& s : def.shells) {
          if (s.d2 == d2) pts.push_back({dx, dy, dz, s.c});
        }
      }
    }
  }
  return pts;
}

bool canonical_less(const StencilPoint& a, const StencilPoint& b) {
  return std::tie(a.dz, a.dy, a.dx) < std::tie(b.dz, b.dy, b.dx);
}

Result<std::vector<double>> parse_csv_doubles(std::string_view csv) {
  std::vector<double> out;
  std::string item;
  std::stringstream ss{std::string(csv)};
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !std::isfinite(v)) {
      return invalid_argument("coefficient '" + item +
                              "' is not a finite number; write --coeffs as e.g. 0.4,0.1");
    }
    out.push_back(v);
  }
  if (out.empty()) return invalid_argument("--coeffs is empty; write e.g. --coeffs 0.4,0.1");
  return out;
}

}  // namespace

bool names_json_file(std::string_view s) {
  return s.find('/') != std::string_view::npos || (s.size() > 5 && s.ends_with(".json"));
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& d : preset_defs()) names.emplace_back(d.name);
  return names;
}

Result<Stencil> Stencil::from_points(std::string name, std::vector<StencilPoint> points) {
  if (points.empty()) return invalid_argument("stencil '" + name + "' has no points");
  std::set<std::tuple<int, int, int>> seen;
  for (const auto& p : points) {
    if (std::abs(p.dx) > kMaxStencilRadius || std::abs(p.dy) > kMaxStencilRadius ||
        std::abs(p.dz) > kMaxStencilRadius) {
      return invalid_argument("stencil '" + name + "' has an offset beyond " +
                              std::to_string(kMaxStencilRadius) + "; use smaller offsets");
    }
    if (!std::isfinite(p.c)) {
      return invalid_argument("stencil '" + name + "' has a non-finite coefficient");
    }
    if (!seen.insert({p.dx, p.dy, p.dz}).second) {
      return invalid_argument("stencil '" + name + "' lists offset (" + std::to_string(p.dx) +
                              ", " + std::to_string(p.dy) + ", " + std::to_string(p.dz) +
                              ") twice; merge the coefficients into one point");
    }
  }
  std::sort(points.begin(), points.end(), canonical_less);
  Stencil s;
  s.name_ = std::move(name);
  s.points_ = std::move(points);
  return s;
}

Result<Stencil> Stencil::preset(std::string_view name) {
  for (const auto& d : preset_defs()) {
    if (name == d.name) return from_points(d.name, preset_points(d));
  }
  std::string list;
  for (const auto& n : preset_names()) list += (list.empty() ? "" : ", ") + n;
  return invalid_argument("unknown stencil '" + std::string(name) + "'; use one of " + list +
                          " or a JSON file");
}

Result<Stencil> Stencil::from_json(std::string_view json_text, std::string name) {
  const char* kForm = "; expected {\"points\": [[dx, dy, dz, c], ...]}";
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("stencil JSON is malformed" + std::string(kForm));
  if (!j.is_object() || !j.contains("points") || !j["points"].is_array()) {
    return invalid_argument("stencil JSON has no \"points\" array" + std::string(kForm));
  }
  if (j.contains("name") && j["name"].is_string()) name = j["name"].get<std::string>();
  // Offsets are read as int only within the largest radius: larger integers would wrap.
  auto small_offset = [](const nlohmann::json& v) {
    return v.is_number_integer() &&
           (v.is_number_unsigned() ? v.get<uint64_t>() <= kMaxStencilRadius
                                   : std::abs(v.get<int64_t>()) <= kMaxStencilRadius);
  };
  std::vector<StencilPoint> pts;
  for (const auto& e : j["points"]) {
    bool ok = e.is_array() && e.size() == 4 && e[3].is_number();
    for (int i = 0; ok && i < 3; ++i) ok = e[i].is_number_integer();
    if (!ok) {
      return invalid_argument("stencil JSON point " + e.dump() +
                              " is not [dx, dy, dz, c] with integer offsets" + kForm);
    }
    if (!small_offset(e[0]) || !small_offset(e[1]) || !small_offset(e[2])) {
      return invalid_argument("stencil JSON point " + e.dump() + " has an offset beyond " +
                              std::to_string(kMaxStencilRadius) +
                              ", the largest radius supported; use smaller offsets");
    }
    pts.push_back({e[0].get<int>(), e[1].get<int>(), e[2].get<int>(), e[3].get<double>()});
  }
  return from_points(std::move(name), std::move(pts));
}

Result<Stencil> Stencil::resolve(std::string_view name_or_file) {
  std::string s(name_or_file);
  if (!names_json_file(s)) return preset(s);
  std::ifstream in(s);
  if (!in) {
    return invalid_argument("cannot read stencil file '" + s +
                            "'; give a preset name or an existing JSON file");
  }
  std::stringstream buf;
  buf << in.rdbuf();
  auto r = from_json(buf.str(), s);
  if (!r.ok()) return r.status().with_context(s);
  return r;
}

Result<Stencil> Stencil::with_coefficients(std::string_view csv) const {
  DG_ASSIGN_OR_RETURN(std::vector<double> cs, parse_csv_doubles(csv));
  std::vector<StencilPoint> pts = points_;
  if (cs.size() == pts.size()) {
    for (size_t i = 0; i < pts.size(); ++i) pts[i].c = cs[i];
    return from_points(name_, std::move(pts));
  }
  std::map<int, size_t> shells;  // d2 -> shell index, in increasing d2
  for (const auto& p : pts) shells[p.dx * p.dx + p.dy * p.dy + p.dz * p.dz] = 0;
  size_t i = 0;
  for (auto& kv : shells) kv.second = i++;
  if (cs.size() != shells.size()) {
    return invalid_argument("stencil " + name_ + " takes " + std::to_string(pts.size()) +
                            " coefficients (one per point) or " + std::to_string(shells.size()) +
                            " (one per distance shell, centre first), not " +
                            std::to_string(cs.size()));
  }
  for (auto& p : pts) p.c = cs[shells[p.dx * p.dx + p.dy * p.dy + p.dz * p.dz]];
  return from_points(name_, std::move(pts));
}

int Stencil::radius_x() const {
  int r = 0;
  for (const auto& p : points_) r = std::max(r, std::abs(p.dx));
  return r;
}
int Stencil::radius_y() const {
  int r = 0;
  for (const auto& p : points_) r = std::max(r, std::abs(p.dy));
  return r;
}
int Stencil::radius_z() const {
  int r = 0;
  for (const auto& p : points_) r = std::max(r, std::abs(p.dz));
  return r;
}
int Stencil::radius() const { return std::max({radius_x(), radius_y(), radius_z()}); }

std::string Stencil::to_json() const {
  nlohmann::json pts = nlohmann::json::array();
  for (const auto& p : points_) pts.push_back({p.dx, p.dy, p.dz, p.c});
  return nlohmann::json{{"name", name_}, {"points", pts}}.dump();
}

std::string Stencil::describe() const {
  return name_ + " (" + std::to_string(size()) + " points, radius " + std::to_string(radius()) +
         ")";
}

}  // namespace deepgrid
