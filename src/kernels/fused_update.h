// One state component's update computed in a single pass over each row: every term's value,
// factor and accumulation per point, in registers, in the order scheme.h promises.
//
// It serves updates of the form
//   u' = q_1 S_1(a_1) [+ q_2 S_2(a_2)] + c * f * S(g)
// where the S_i are one-point stencils at the point itself (terms without factors) and S is a
// star stencil of radius 1, 2 or 4 (the shape of laplacian2/4/8, any coefficients) times one
// factor f: the wave equations (2u - u@1 + m lap(u)) and heat-var (u + kappa lap(u)), built in
// or written as JSON. Other updates go through SchemeKernel's term-by-term path.
//
// The same pass stores up to two of the scheme's carried components (scheme.h) whose source
// it reads at the point anyway (a_1, a_2 or f: the wave's u@1 <- u and m <- m), instead of a
// copy per row after it (which cost wave2 30% of its in-core rate at 256^3).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "deepgrid/scheme.h"
#include "kernels/point_rows.h"
#include "kernels/stencil_kernel.h"

namespace deepgrid::internal {

// Whether the stencil is the point itself (one point at offset 0).
bool is_point(const Stencil& s);

template <typename T>
class FusedUpdate {
 public:
  // The fused form of `update`, or nothing when it has another form. It takes over the
  // carried (to, from) pairs it can store, removing them from `carried`.
  static std::optional<FusedUpdate> of(const SchemeUpdate& update,
                                       std::vector<std::pair<int, int>>& carried);

  // Writes the update's component, and the carried components it took over that `at` writes,
  // of every point of `rect`: component c to out[c * out_field + (y - rect.y0) * out_stride +
  // (x - rect.x0)], reading the stencil's component as SchemeKernel::apply does
  // (at.in[rz + dz] + c * at.field; rz: the scheme's radius along z) and the point's
  // components through `at`.
  void apply(const PointRows<T>& at, T* out, ptrdiff_t out_stride, ptrdiff_t out_field,
             Rect rect) const {
    std::array<Copy, 2> written{};
    int n = 0;
    for (int i = 0; i < copy_count; ++i) {
      if (at.aliased.writes(copies[static_cast<size_t>(i)].to)) {
        written[static_cast<size_t>(n++)] = copies[static_cast<size_t>(i)];
      }
    }
    fn_[at.aliased.in_place ? 1 : 0][static_cast<size_t>(n)](*this, at, written, out, out_stride,
                                                             out_field, rect);
  }

  // The form's parts, public for the row functions.
  struct PointTerm {
    int component;
    T c;  // the one-point stencil's coefficient
    T q;  // the term's constant
  };
  // A carried component stored from one of the values the pass reads at the point.
  enum class Source { kPoint0, kPoint1, kFactor };
  struct Copy {
    int to;
    Source from;
  };
  int component = 0;  // the update's
  std::array<PointTerm, 2> points{};
  int point_count = 0;
  std::array<Copy, 2> copies{};
  int copy_count = 0;
  int factor = 0;             // f's component
  int stencil_component = 0;  // g
  T q = 0;                    // c, rounded to T
  std::vector<T> coef;        // S's coefficients in canonical order

 private:
  using Fn = void (*)(const FusedUpdate&, const PointRows<T>&, const std::array<Copy, 2>&, T*,
                      ptrdiff_t, ptrdiff_t, Rect);
  // By whether the output is written over a point component's input (AliasedPlanes::in_place),
  // and the number of copies stored.
  std::array<std::array<Fn, 3>, 2> fn_{};
};

extern template class FusedUpdate<float>;
extern template class FusedUpdate<double>;

}  // namespace deepgrid::internal
