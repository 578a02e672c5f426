// internal: integer arithmetic that C++'s operators round the other way.
#pragma once

#include <cstdint>

namespace deepgrid::internal {

// a / b rounded toward negative infinity (C++'s / rounds toward zero). b != 0.
inline int64_t floor_div(int64_t a, int64_t b) {
  return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

// a / b rounded up, for a >= 0 and b > 0.
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace deepgrid::internal
