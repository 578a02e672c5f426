// Schemes the engine tests share: a coupled scheme of terms and a user's kernel
// (tests/kernels/test_kernel.c, built as a test library).
#pragma once

#include <string>

#include "deepgrid/probes.h"

namespace deepgrid::testing {

// Two state fields (one keeping two levels) and a coefficient field, coupled through
// products of fields and stencils of every shape and reach (13pt: radius 2 along every axis).
inline const char* const kCoupledScheme = R"({"name": "coupled",
  "fields": [{"name": "a", "levels": 2}, {"name": "b"},
             {"name": "k", "coefficient": true, "value": 0.05}],
  "update": {
    "a": [{"coef": 0.5, "field": "a"},
          {"coef": ["k", "b"], "stencil": "laplacian2", "field": "b"},
          {"coef": -0.25, "stencil": "27pt", "field": "a@1"}],
    "b": [{"coef": [0.3, "k"], "stencil": "13pt", "field": "a"},
          {"coef": 0.7, "field": "b"}]}})";

// The wave equation in the fused kernels' form (kernels/fused_update.h) with every constant
// away from 1: point terms with a
// one-point stencil's own coefficient, a constant times the factor, a 13pt star of its own
// coefficients, and the terms reading u@1 first.
inline const char* const kFusedFormScheme = R"({"name": "fused-form",
  "fields": [{"name": "v", "levels": 2}, {"name": "c", "coefficient": true, "value": 0.1}],
  "update": {"v": [{"coef": 1.5, "stencil": {"points": [[0, 0, 0, 0.75]]}, "field": "v@1"},
                   {"coef": -0.5, "field": "v"},
                   {"coef": [0.3, "c"], "field": "v", "stencil": {"points": [
                      [0, 0, -2, 0.1], [0, 0, -1, 0.2], [0, -2, 0, 0.3], [0, -1, 0, 0.4],
                      [-2, 0, 0, 0.5], [-1, 0, 0, 0.6], [0, 0, 0, -3.3], [1, 0, 0, 0.7],
                      [2, 0, 0, 0.8], [0, 1, 0, 0.9], [0, 2, 0, 0.11], [0, 0, 1, 0.12],
                      [0, 0, 2, 0.13]]}}]}})";

// A coefficient field before the state's: the stream's stages read it from each stage's input
// level (a window shares only coefficient fields that are the last ones, StreamPlan).
inline const char* const kLeadingCoefficientScheme = R"({"name": "leading-coefficient",
  "fields": [{"name": "c", "coefficient": true, "value": 0.1}, {"name": "v", "levels": 2}],
  "update": {"v": [{"coef": 2, "field": "v"}, {"coef": -1, "field": "v@1"},
                   {"coef": "c", "stencil": "laplacian4", "field": "v"}]}})";

// Three time levels: u@2 <- u@1 <- u, u@2 read at the point (lean wavefronts leave u@1 out of
// their rings and keep u@2, whose source is two levels down).
inline const char* const kThreeLevelScheme = R"({"name": "three-levels",
  "fields": [{"name": "u", "levels": 3}],
  "update": {"u": [{"coef": 0.5, "field": "u@2"},
                   {"coef": 0.25, "stencil": "7pt", "field": "u"}]}})";

// A user's kernel (tests/kernels/test_kernel.c: nonlinear, two state fields and a
// coefficient, radii 2, 1, 2, terms of the global position).
inline const std::string kKernelScheme =
    std::string(R"({"kernel": ")") + DEEPGRID_TEST_KERNEL_DIR + R"(/libtest_kernel.so"})";

// Sources for a grid of 17 x 12 x 14: a Ricker shot at (8, 6, 7) and a short series in the
// corner (0, 11, 0), whose periodic copies lie in the halos of tiles (and parts) at the far ends.
inline Probes shot_and_corner() {
  Probes probes;
  SourceSpec shot;
  shot.x = 8, shot.y = 6, shot.z = 7;
  shot.frequency = 0.2, shot.delay = 2;
  probes.sources.push_back(shot);
  SourceSpec corner;
  corner.x = 0, corner.y = 11, corner.z = 0;
  corner.series = {0.5, -0.25, 0.125};
  probes.sources.push_back(corner);
  return probes;
}

}  // namespace deepgrid::testing
