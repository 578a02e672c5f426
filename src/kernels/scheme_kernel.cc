#include "kernels/scheme_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace deepgrid {
namespace {

// A user kernel's arguments and function for values of type T.
template <typename T>
using UserArgs =
    std::conditional_t<std::is_same_v<T, float>, dg_kernel_args_f32, dg_kernel_args_f64>;

template <typename T>
auto user_function(const KernelLibrary& lib) {
  if constexpr (std::is_same_v<T, float>) {
    return lib.apply_f32();
  } else {
    return lib.apply_f64();
  }
}

int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }

// Splits [lo, hi) of local positions (global = origin + local) where the global position
// crosses a multiple of n: f(a, b, global position of a, wrapped into [0, n)).
template <typename F>
void split_at_wraps(int64_t origin, int64_t lo, int64_t hi, int64_t n, F&& f) {
  for (int64_t a = lo; a < hi;) {
    const int64_t g = wrap(origin + a, n);
    const int64_t b = std::min(hi, a + (n - g));
    f(a, b, g);
    a = b;
  }
}

}  // namespace

template <typename T>
SchemeKernel<T>::SchemeKernel(const Scheme& scheme)
    : carried_(scheme.carried()),
      rx_(scheme.radius_x()),
      ry_(scheme.radius_y()),
      rz_(scheme.radius_z()),
      components_(scheme.component_count()) {
  if (scheme.is_stencil()) {
    stencil_.emplace(scheme.stencil());
    return;
  }
  if (scheme.kernel()) {
    user_ = scheme.kernel();
    int c = 0;
    for (const SchemeField& f : scheme.fields()) {
      if (!f.coefficient) state_components_.push_back(c);
      c += f.levels;
    }
    return;
  }
  aliasable_ = internal::aliasable_components(scheme);
  std::vector<std::pair<int, int>> left = carried_;  // what the fused passes do not store
  for (const SchemeUpdate& u : scheme.updates()) {
    if (auto fused = internal::FusedUpdate<T>::of(u, left)) fused_.push_back(std::move(*fused));
  }
  if (fused_.size() == scheme.updates().size()) {
    fused_carried_ = std::move(left);
  } else {
    fused_.clear();
  }
  rotation_ = rotation_of();
  for (const SchemeUpdate& u : scheme.updates()) {
    Update out{u.component, {}};
    for (const SchemeTerm& t : u.terms) {
      out.terms.push_back(Term{static_cast<T>(t.c), t.c == 1 && t.factors.empty(), t.factors,
                               t.component, StencilKernel<T>(t.stencil)});
    }
    updates_.push_back(std::move(out));
  }
}

template <typename T>
void SchemeKernel<T>::apply(const T* const* in, ptrdiff_t in_stride, ptrdiff_t in_field, T* out,
                            ptrdiff_t out_stride, ptrdiff_t out_field, Rect rect,
                            const PlanePosition& at,
                            const internal::AliasedPlanes<T>& aliased) const {
  if (stencil_) {
    if (aliased.bypass_caches) {
      stencil_->apply_bypassing_caches(in, in_stride, out, out_stride, rect);
    } else {
      stencil_->apply(in, in_stride, out, out_stride, rect);
    }
    return;
  }
  if (user_) {
    // Pieces that stay inside the grid's periodic images, each with global coordinates.
    split_at_wraps(at.y, rect.y0, rect.y1, at.shape.ny, [&](int64_t y0, int64_t y1, int64_t gy) {
      split_at_wraps(at.x, rect.x0, rect.x1, at.shape.nx, [&](int64_t x0, int64_t x1, int64_t gx) {
        const ptrdiff_t to = (y0 - rect.y0) * out_stride + (x0 - rect.x0);
        apply_user(in, in_stride, in_field, out + to, out_stride, out_field, {x0, x1, y0, y1}, gx,
                   gy, at);
      });
    });
    return;
  }
  const internal::PointRows<T> rows{in, rz_, in_stride, in_field, aliased};
  if (!fused_.empty()) {
    apply_fused(rows, out, out_stride, out_field, rect);
    return;
  }
  for (int64_t y = rect.y0; y < rect.y1; ++y) {
    apply_row(rows, out + (y - rect.y0) * out_stride, out_field, y, rect.x0, rect.x1);
  }
}

// One row: each update term by term (the first term's stencil straight into the output row,
// later ones through a scratch row), then the carried components. A term's q is built over
// the row factor by factor (q = c * f_1, q = q * f_2, ...) so that every loop vectorises.
template <typename T>
void SchemeKernel<T>::apply_row(const internal::PointRows<T>& at, T* out, ptrdiff_t out_field,
                                int64_t y, int64_t x0, int64_t x1) const {
  const int64_t width = x1 - x0;
  thread_local std::vector<T> rows;  // the stencil's scratch row, then q's
  if (rows.size() < 2 * static_cast<size_t>(width)) rows.resize(2 * static_cast<size_t>(width));
  T* __restrict sc = rows.data();
  T* __restrict qv = rows.data() + width;
  for (const Update& u : updates_) {
    T* __restrict o = out + u.component * out_field;
    for (size_t k = 0; k < u.terms.size(); ++k) {
      const Term& t = u.terms[k];
      // The stencil's planes from row y, so that an aliased component's (read at the point
      // only) can be its own row.
      const T* planes[2 * kMaxStencilRadius + 1];
      const int trz = t.kernel.rz();
      for (int dz = -trz; dz <= trz; ++dz) {
        planes[trz + dz] = dz == 0 ? at.row(t.component, y)
                                   : at.in[rz_ + dz] + t.component * at.field + y * at.stride;
      }
      t.kernel.apply(planes, at.stride, k == 0 ? o : sc, 0, Rect{x0, x1, 0, 1});
      if (k == 0 && t.identity) continue;
      const T c = t.c;
      if (t.factors.empty()) {
        if (k == 0) {
#pragma omp simd
          for (int64_t i = 0; i < width; ++i) o[i] = c * o[i];
        } else {
#pragma omp simd
          for (int64_t i = 0; i < width; ++i) o[i] = std::fma(c, sc[i], o[i]);
        }
        continue;
      }
      for (size_t j = 0; j < t.factors.size(); ++j) {
        const T* __restrict f = at.row(t.factors[j], y) + x0;
        if (j == 0) {
#pragma omp simd
          for (int64_t i = 0; i < width; ++i) qv[i] = c * f[i];
        } else {
#pragma omp simd
          for (int64_t i = 0; i < width; ++i) qv[i] = qv[i] * f[i];
        }
      }
      if (k == 0) {
#pragma omp simd
        for (int64_t i = 0; i < width; ++i) o[i] = qv[i] * o[i];
      } else {
#pragma omp simd
        for (int64_t i = 0; i < width; ++i) o[i] = std::fma(qv[i], sc[i], o[i]);
      }
    }
  }
  copy_carried(carried_, at, y, x0, out, out_field, width);
}

// Each update over the whole rectangle in one pass per row, storing the carried components it
// can; then the other carried components.
// One fused update of the form 2u - u@1 + ... (two point terms) that stores u@1 <- u from its
// own point term: then u's new value may go over u@1's plane, if nothing else reads u@1.
template <typename T>
std::pair<int, int> SchemeKernel<T>::rotation_of() const {
  const std::pair<int, int> none{-1, -1};
  if (fused_.size() != 1 || !fused_carried_.empty() || fused_[0].point_count != 2) return none;
  const internal::FusedUpdate<T>& u = fused_[0];
  using Source = typename internal::FusedUpdate<T>::Source;
  for (int i = 0; i < u.copy_count; ++i) {
    const auto& copy = u.copies[static_cast<size_t>(i)];
    if (copy.from == Source::kFactor) continue;
    const int own = copy.from == Source::kPoint0 ? 0 : 1;
    const int to = copy.to;
    const bool read_elsewhere = std::any_of(carried_.begin(), carried_.end(),
                                            [&](const auto& pair) { return pair.second == to; });
    if (u.points[static_cast<size_t>(own)].component == u.component &&
        u.points[static_cast<size_t>(1 - own)].component == to && (aliasable_ >> to & 1) != 0 &&
        u.factor != to && u.stencil_component != to && !read_elsewhere) {
      return {to, u.component};
    }
  }
  return none;
}

template <typename T>
void SchemeKernel<T>::apply_fused(const internal::PointRows<T>& at, T* out, ptrdiff_t out_stride,
                                  ptrdiff_t out_field, Rect rect) const {
  for (const internal::FusedUpdate<T>& u : fused_) {
    u.apply(at, out, out_stride, out_field, rect);
  }
  if (fused_carried_.empty()) return;
  for (int64_t y = rect.y0; y < rect.y1; ++y) {
    copy_carried(fused_carried_, at, y, rect.x0, out + (y - rect.y0) * out_stride, out_field,
                 rect.x1 - rect.x0);
  }
}

// One call of the user's kernel, then the carried components row by row.
template <typename T>
void SchemeKernel<T>::apply_user(const T* const* in, ptrdiff_t in_stride, ptrdiff_t in_field,
                                 T* out, ptrdiff_t out_stride, ptrdiff_t out_field, Rect rect,
                                 int64_t gx, int64_t gy, const PlanePosition& at) const {
  thread_local std::vector<const T*> inputs;
  thread_local std::vector<T*> outputs;
  inputs.clear();
  const ptrdiff_t first = rect.y0 * in_stride + rect.x0;
  for (int dz = -rz_; dz <= rz_; ++dz) {
    for (int c = 0; c < components_; ++c) inputs.push_back(in[rz_ + dz] + c * in_field + first);
  }
  outputs.clear();
  for (int c : state_components_) outputs.push_back(out + c * out_field);
  UserArgs<T> args;
  args.in = inputs.data();
  args.in_stride = in_stride;
  args.out = outputs.data();
  args.out_stride = out_stride;
  args.width = rect.x1 - rect.x0;
  args.height = rect.y1 - rect.y0;
  args.x0 = gx;
  args.y0 = gy;
  args.z = wrap(at.z, at.shape.nz);
  args.nx = at.shape.nx;
  args.ny = at.shape.ny;
  args.nz = at.shape.nz;
  args.step = at.step;
  args.components = components_;
  const auto apply = user_function<T>(*user_);
  apply(&args);
  const internal::AliasedPlanes<T> none;
  const internal::PointRows<T> rows{in, rz_, in_stride, in_field, none};
  for (int64_t y = rect.y0; y < rect.y1; ++y) {
    copy_carried(carried_, rows, y, rect.x0, out + (y - rect.y0) * out_stride, out_field,
                 rect.x1 - rect.x0);
  }
}

template <typename T>
void SchemeKernel<T>::copy_carried(const std::vector<std::pair<int, int>>& pairs,
                                   const internal::PointRows<T>& at, int64_t y, int64_t x0, T* out,
                                   ptrdiff_t out_field, int64_t width) {
  for (const auto& [to, from] : pairs) {
    if (at.aliased.writes(to)) {
      std::memcpy(out + to * out_field, at.row(from, y) + x0, sizeof(T) * width);
    }
  }
}

namespace internal {

uint64_t aliasable_components(const Scheme& scheme) {
  if (scheme.is_stencil() || scheme.kernel()) return 0;
  const std::vector<std::pair<int, int>>& carried = scheme.carried();
  std::vector<bool> off_point(static_cast<size_t>(scheme.component_count()), false);
  for (const SchemeUpdate& u : scheme.updates()) {
    for (const SchemeTerm& t : u.terms) {
      if (!is_point(t.stencil)) off_point[static_cast<size_t>(t.component)] = true;
    }
  }
  auto is_carried = [&](int c) {
    return std::any_of(carried.begin(), carried.end(), [&](const auto& p) { return p.first == c; });
  };
  uint64_t mask = 0;
  for (const auto& [to, from] : carried) {
    if (to < 64 && !off_point[static_cast<size_t>(to)] && (from == to || !is_carried(from))) {
      mask |= uint64_t{1} << to;
    }
  }
  return mask;
}

}  // namespace internal

template class SchemeKernel<float>;
template class SchemeKernel<double>;

}  // namespace deepgrid
