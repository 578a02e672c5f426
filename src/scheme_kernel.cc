#include "deepgrid/scheme_kernel.h"

#include <cmath>
#include <cstring>

namespace deepgrid {

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
                            ptrdiff_t out_stride, ptrdiff_t out_field, Rect rect) const {
  if (stencil_) {
    stencil_->apply(in, in_stride, out, out_stride, rect);
    return;
  }
  for (int64_t y = rect.y0; y < rect.y1; ++y) {
    apply_row(in, in_stride, in_field, out + (y - rect.y0) * out_stride, out_field, y, rect.x0,
              rect.x1);
  }
}

// One row: each update term by term (the first term's stencil straight into the output row,
// later ones through a scratch row), then the carried components.
template <typename T>
void SchemeKernel<T>::apply_row(const T* const* in, ptrdiff_t in_stride, ptrdiff_t in_field, T* out,
                                ptrdiff_t out_field, int64_t y, int64_t x0, int64_t x1) const {
  const int64_t width = x1 - x0;
  thread_local std::vector<T> scratch;
  if (scratch.size() < static_cast<size_t>(width)) scratch.resize(static_cast<size_t>(width));
  const ptrdiff_t row = y * in_stride + x0;  // the row's first point in every input plane
  for (const Update& u : updates_) {
    T* __restrict o = out + u.component * out_field;
    for (size_t k = 0; k < u.terms.size(); ++k) {
      const Term& t = u.terms[k];
      const T* planes[2 * kMaxStencilRadius + 1];
      const int trz = t.kernel.rz();
      for (int dz = -trz; dz <= trz; ++dz) planes[trz + dz] = in[rz_ + dz] + t.component * in_field;
      t.kernel.apply(planes, in_stride, k == 0 ? o : scratch.data(), 0, Rect{x0, x1, y, y + 1});
      if (k == 0 && t.identity) continue;
      // q = c * f_1 * f_2 * ..., then the first term's product or the fused accumulation.
      const T* f[kMaxTermFactors];
      const size_t nf = t.factors.size();
      for (size_t i = 0; i < nf; ++i) f[i] = in[rz_] + t.factors[i] * in_field + row;
      auto q = [&](int64_t i) __attribute__((always_inline)) {
        T v = t.c;
        for (size_t j = 0; j < nf; ++j) v = v * f[j][i];
        return v;
      };
      // No `omp simd`: the factor loop's trip count is not constant, so clang cannot always
      // vectorise (a -Werror warning there); GCC vectorises these loops on its own.
      if (k == 0) {
        for (int64_t i = 0; i < width; ++i) o[i] = q(i) * o[i];
      } else {
        const T* __restrict sc = scratch.data();
        for (int64_t i = 0; i < width; ++i) o[i] = std::fma(q(i), sc[i], o[i]);
      }
    }
  }
  for (const auto& [to, from] : carried_) {
    std::memcpy(out + to * out_field, in[rz_] + from * in_field + row, sizeof(T) * width);
  }
}

template class SchemeKernel<float>;
template class SchemeKernel<double>;

}  // namespace deepgrid
