// A stencil: u'[z][y][x] = sum_k c_k * u[z+dz_k][y+dy_k][x+dx_k].
//
// Evaluation order (the contract that makes every engine bitwise identical): points are kept
// sorted by (dz, dy, dx); an update computes, in the grid's dtype,
//   acc = c_0 * u_0;  acc = fma(c_k, u_k, acc) for k = 1, 2, ...
// with a fused multiply-add (one rounding) and the coefficients rounded to the dtype.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "deepgrid/status.h"

namespace deepgrid {

struct StencilPoint {
  int dx = 0, dy = 0, dz = 0;
  double c = 0;
  bool operator==(const StencilPoint&) const = default;
};

// Largest offset accepted along any axis.
inline constexpr int kMaxStencilRadius = 16;

class Stencil {
 public:
  // Validates and canonicalises (sorts) the points. Fails on an empty list, duplicate
  // offsets, offsets beyond kMaxStencilRadius, or non-finite coefficients.
  static Result<Stencil> from_points(std::string name, std::vector<StencilPoint> points);
  // A preset by name: 7pt, 13pt, 19pt, 25pt, 27pt (3D); 5pt, 9pt (2D).
  static Result<Stencil> preset(std::string_view name);
  // Parses {"points": [[dx, dy, dz, c], ...], "name": optional}.
  static Result<Stencil> from_json(std::string_view json_text, std::string name = "custom");
  // NAME of a preset, or the path of a JSON file.
  static Result<Stencil> resolve(std::string_view name_or_file);

  // Replaces the coefficients: either one per point (in canonical order) or one per shell
  // (points grouped by dx^2+dy^2+dz^2, in increasing distance). Text: "0.4,0.1".
  Result<Stencil> with_coefficients(std::string_view csv) const;

  const std::string& name() const { return name_; }
  const std::vector<StencilPoint>& points() const { return points_; }
  int size() const { return static_cast<int>(points_.size()); }
  int radius() const;    // largest |offset| along any axis
  int radius_x() const;  // largest |dx|
  int radius_y() const;  // largest |dy|
  int radius_z() const;  // largest |dz|
  int flops_per_update() const { return 2 * size() - 1; }
  std::string to_json() const;   // {"name": ..., "points": [[dx, dy, dz, c], ...]}
  std::string describe() const;  // "7pt (7 points, radius 1)"

 private:
  std::string name_;
  std::vector<StencilPoint> points_;
};

// Whether a stencil (or scheme) argument names a JSON file rather than a preset: it holds a
// '/' or ends in ".json".
bool names_json_file(std::string_view name_or_file);

// Names of the presets, for help texts.
std::vector<std::string> preset_names();

}  // namespace deepgrid
