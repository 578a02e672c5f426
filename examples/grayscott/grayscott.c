/* Gray-Scott reaction-diffusion as a deepgrid user kernel (deepgrid/kernel.h).
 *
 *   u' = u + Du lap(u) - u v^2 + F (1 - u)
 *   v' = v + Dv lap(v) + u v^2 - (F + k) v
 *
 * with the 7-point Laplacian (unit spacing, unit time step). The feed rate F and the kill rate
 * k are coefficient fields, so a grid may vary them in space; a new grid starts them at the
 * values below. Build (from an installed deepgrid, or with CMakeLists.txt beside this file):
 *
 *   cc -shared -fPIC -O2 -ffp-contract=off -I<prefix>/include grayscott.c -o libgrayscott.so
 */
#include <deepgrid/kernel.h>

/* Components in plane order: the state fields u and v, then the coefficient fields F and k. */
enum { U, V, F, K, COMPONENTS };

static const double kDu = 0.14, kDv = 0.07; /* explicit 3D diffusion is stable below 1/6 */

static const dg_kernel_field fields[] = {
    {"u", 1, 0, 0},
    {"v", 1, 0, 0},
    {"F", 1, 1, 0.030},
    {"k", 1, 1, 0.057},
};

static const dg_kernel_info info = {
    DG_KERNEL_ABI_VERSION,
    "grayscott",
    4,
    fields,
    1, /* radius_x */
    1, /* radius_y */
    1, /* radius_z */
    28, /* flops per point: two 7-point Laplacians (7 each) and the reaction terms (14) */
    DG_KERNEL_F32 | DG_KERNEL_F64,
};

DG_KERNEL_EXPORT const dg_kernel_info* dg_kernel_describe(void) { return &info; }

/* Component c of input plane z + dz (dz in -1..1). */
#define PLANE(args, c, dz) ((args)->in[((dz) + 1) * COMPONENTS + (c)])

/* One rectangle; the same code for both value types. */
#define GRAYSCOTT(T, args)                                                                  \
  do {                                                                                      \
    const ptrdiff_t s = (args)->in_stride;                                                  \
    for (int64_t j = 0; j < (args)->height; ++j) {                                          \
      const T* u = PLANE(args, U, 0) + j * s;                                               \
      const T* v = PLANE(args, V, 0) + j * s;                                               \
      const T *ub = PLANE(args, U, -1) + j * s, *ua = PLANE(args, U, 1) + j * s;            \
      const T *vb = PLANE(args, V, -1) + j * s, *va = PLANE(args, V, 1) + j * s;            \
      const T* f = PLANE(args, F, 0) + j * s;                                               \
      const T* k = PLANE(args, K, 0) + j * s;                                               \
      T* uo = (args)->out[0] + j * (args)->out_stride;                                      \
      T* vo = (args)->out[1] + j * (args)->out_stride;                                      \
      for (int64_t i = 0; i < (args)->width; ++i) {                                         \
        const T lu = u[i - 1] + u[i + 1] + u[i - s] + u[i + s] + ub[i] + ua[i] - 6 * u[i];  \
        const T lv = v[i - 1] + v[i + 1] + v[i - s] + v[i + s] + vb[i] + va[i] - 6 * v[i];  \
        const T uvv = u[i] * v[i] * v[i];                                                   \
        uo[i] = u[i] + (T)kDu * lu - uvv + f[i] * (1 - u[i]);                               \
        vo[i] = v[i] + (T)kDv * lv + uvv - (f[i] + k[i]) * v[i];                            \
      }                                                                                     \
    }                                                                                       \
  } while (0)

DG_KERNEL_EXPORT void dg_kernel_apply_f32(const dg_kernel_args_f32* args) {
  GRAYSCOTT(float, args);
}

DG_KERNEL_EXPORT void dg_kernel_apply_f64(const dg_kernel_args_f64* args) {
  GRAYSCOTT(double, args);
}
