// Element types of a grid.
#pragma once

#include <cstddef>
#include <string_view>

#include "deepgrid/status.h"

namespace deepgrid {

enum class DType { kF32, kF64 };

constexpr size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 8; }
std::string_view dtype_name(DType t);  // "f32" or "f64"

// Accepts f32, float32, f64, float64.
Result<DType> parse_dtype(std::string_view text);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kF64;
}

// Calls f(float{}) or f(double{}) for the dtype: one place that turns a runtime dtype into a
// template argument.
template <typename F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  if (t == DType::kF32) return f(float{});
  return f(double{});
}

}  // namespace deepgrid
