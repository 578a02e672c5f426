// A manifest for planning only, with no files behind it: what the plan tests give the planners.
#pragma once

#include "deepgrid/store.h"

namespace deepgrid::testing {

// A manifest for planning only (no files): f32, one stripe, 8 MiB chunks.
inline Manifest planning_manifest(const Shape& shape) {
  Manifest m;
  m.shape = shape;
  m.layout = plan_layout(shape, DType::kF32, 1, 8 << 20, default_spare_planes(shape.nz)).value();
  return m;
}

}  // namespace deepgrid::testing
