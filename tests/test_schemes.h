// Schemes the engine tests share: a coupled scheme of terms and a user's kernel
// (tests/kernels/test_kernel.c, built as a test library).
#pragma once

#include <string>

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

// A user's kernel (tests/kernels/test_kernel.c: nonlinear, two state fields and a
// coefficient, radii 2, 1, 2, terms of the global position).
inline const std::string kKernelScheme =
    std::string(R"({"kernel": ")") + DEEPGRID_TEST_KERNEL_DIR + R"(/libtest_kernel.so"})";

}  // namespace deepgrid::testing
