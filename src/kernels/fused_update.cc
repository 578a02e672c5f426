#include "kernels/fused_update.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "kernels/fixed_shape.h"

namespace deepgrid::internal {
namespace {

// Every row of `rc`: P point terms, then the factor times the stencil of shape Shape, and C
// carried components. kOnce: the output may be a point term's own plane (written over it),
// so each point is computed once and no row is `restrict`.
template <typename T, int P, int C, bool kOnce, typename Shape, size_t... K>
void fused_rows(const FusedUpdate<T>& u, const PointRows<T>& at,
                const std::array<typename FusedUpdate<T>::Copy, 2>& copies, T* out,
                ptrdiff_t out_stride, ptrdiff_t out_field, Rect rc,
                std::index_sequence<K...> shape) {
  using Source = typename FusedUpdate<T>::Source;
  const T coef[] = {u.coef[K]...};
  const T q = u.q;
  const T pc0 = u.points[0].c, pq0 = u.points[0].q;
  const T pc1 = u.points[1].c, pq1 = u.points[1].q;
  // The stencil's planes, in[rz + dz] for its own radius along z.
  const T* planes[2 * Shape::kRz + 1];
  for (int dz = -Shape::kRz; dz <= Shape::kRz; ++dz) {
    planes[Shape::kRz + dz] = at.in[at.rz + dz] + u.stencil_component * at.field;
  }
  using In = std::conditional_t<kOnce, const T*, const T* __restrict>;
  using Out = std::conditional_t<kOnce, T*, T* __restrict>;
  const int64_t width = rc.x1 - rc.x0;
  for (int64_t y = rc.y0; y < rc.y1; ++y) {
    const T* rows[Shape::kRows];
    Shape::set_rows(planes, y * at.stride + rc.x0, at.stride, rows);
    In p0 = at.row(u.points[0].component, y) + rc.x0;
    In p1 = at.row(u.points[1].component, y) + rc.x0;
    In f = at.row(u.factor, y) + rc.x0;
    const ptrdiff_t out_row = (y - rc.y0) * out_stride;
    Out o = out + u.component * out_field + out_row;
    auto source = [&](Source from) {
      return from == Source::kPoint0 ? p0 : from == Source::kPoint1 ? p1 : f;
    };
    In s0 = source(copies[0].from);
    In s1 = source(copies[1].from);
    Out c0 = out + copies[0].to * out_field + out_row;
    Out c1 = out + copies[1].to * out_field + out_row;
    auto finish = [&](int64_t i, T sum) __attribute__((always_inline)) {
      T acc = pq0 * (pc0 * p0[i]);
      if constexpr (P == 2) acc = std::fma(pq1, pc1 * p1[i], acc);
      o[i] = std::fma(q * f[i], sum, acc);
      if constexpr (C >= 1) c0[i] = s0[i];
      if constexpr (C == 2) c1[i] = s1[i];
    };
    // Blocks whose stencil sums interleave (FixedShape::sum_block), the rest a vector at a
    // time.
    for_each_row_point<T, Shape, kOnce>(
        rows[Shape::kCentreRow], width,
        [&](int64_t i) __attribute__((always_inline)) {
          constexpr int64_t kB = kBlockPoints<T>;
          alignas(64) T sums[kB];
          Shape::template sum_block<T, kB>(rows, coef, i, sums, shape);
#pragma omp simd
          for (int64_t j = 0; j < kB; ++j) finish(i + j, sums[j]);
        },
        [&](int64_t i)
            __attribute__((always_inline)) { finish(i, Shape::sum(rows, coef, i, shape)); });
  }
}

template <typename T, int P, int C, bool kOnce, int R>
void apply_form(const FusedUpdate<T>& u, const PointRows<T>& at,
                const std::array<typename FusedUpdate<T>::Copy, 2>& copies, T* out,
                ptrdiff_t out_stride, ptrdiff_t out_field, Rect rc) {
  using Shape = FixedShape<R, true, 1>;
  fused_rows<T, P, C, kOnce, Shape>(u, at, copies, out, out_stride, out_field, rc,
                                    std::make_index_sequence<Shape::size()>{});
}

template <typename T, int P, int C, bool kOnce>
auto form_of_radius(int r) {
  return r == 1   ? &apply_form<T, P, C, kOnce, 1>
         : r == 2 ? &apply_form<T, P, C, kOnce, 2>
                  : &apply_form<T, P, C, kOnce, 4>;
}

template <typename T, int P, bool kOnce>
auto form_of(int copies, int r) {
  return copies == 0   ? form_of_radius<T, P, 0, kOnce>(r)
         : copies == 1 ? form_of_radius<T, P, 1, kOnce>(r)
                       : form_of_radius<T, P, 2, kOnce>(r);
}

// Whether the stencil's offsets are those of the star shape FixedShape<R, true, 1>.
template <int R>
bool has_star_shape(const Stencil& s) {
  constexpr auto offsets = FixedShape<R, true, 1>::offsets();
  return std::equal(offsets.begin(), offsets.end(), s.points().begin(), s.points().end(),
                    [](const Offset& o, const StencilPoint& p) {
                      return o.dx == p.dx && o.dy == p.dy && o.dz == p.dz;
                    });
}

// The radius of the star shape whose offsets are the stencil's, or 0.
int star_radius(const Stencil& s) {
  if (has_star_shape<1>(s)) return 1;
  if (has_star_shape<2>(s)) return 2;
  if (has_star_shape<4>(s)) return 4;
  return 0;
}

}  // namespace

bool is_point(const Stencil& s) {
  return s.size() == 1 && s.points()[0].dx == 0 && s.points()[0].dy == 0 && s.points()[0].dz == 0;
}

template <typename T>
std::optional<FusedUpdate<T>> FusedUpdate<T>::of(const SchemeUpdate& update,
                                                 std::vector<std::pair<int, int>>& carried) {
  const std::vector<SchemeTerm>& terms = update.terms;
  const size_t n = terms.size();
  if (n < 2 || n > 3) return std::nullopt;
  FusedUpdate u;
  u.component = update.component;
  for (size_t k = 0; k + 1 < n; ++k) {
    const SchemeTerm& t = terms[k];
    if (!is_point(t.stencil) || !t.factors.empty()) return std::nullopt;
    u.points[k] = {t.component, static_cast<T>(t.stencil.points()[0].c), static_cast<T>(t.c)};
  }
  u.point_count = static_cast<int>(n - 1);
  const SchemeTerm& last = terms.back();
  const int r = star_radius(last.stencil);
  if (r == 0 || last.factors.size() != 1) return std::nullopt;
  u.factor = last.factors[0];
  u.stencil_component = last.component;
  u.q = static_cast<T>(last.c);
  for (const StencilPoint& p : last.stencil.points()) u.coef.push_back(static_cast<T>(p.c));
  // The carried components whose source the pass reads at the point.
  auto source = [&](int c) -> std::optional<Source> {
    if (c == u.points[0].component) return Source::kPoint0;
    if (u.point_count == 2 && c == u.points[1].component) return Source::kPoint1;
    if (c == u.factor) return Source::kFactor;
    return std::nullopt;
  };
  std::erase_if(carried, [&](const std::pair<int, int>& pair) {
    const std::optional<Source> from = source(pair.second);
    if (!from || u.copy_count == 2) return false;
    u.copies[static_cast<size_t>(u.copy_count++)] = {pair.first, *from};
    return true;
  });
  for (int c = 0; c <= u.copy_count; ++c) {
    u.fn_[0][static_cast<size_t>(c)] =
        u.point_count == 2 ? form_of<T, 2, false>(c, r) : form_of<T, 1, false>(c, r);
    // Written over its own input only where a component read at the point is rotated (the
    // in-core engine's time levels: u@1's plane takes the new u), so with two point terms.
    if (u.point_count == 2) u.fn_[1][static_cast<size_t>(c)] = form_of<T, 2, true>(c, r);
  }
  return u;
}

template class FusedUpdate<float>;
template class FusedUpdate<double>;

}  // namespace deepgrid::internal
