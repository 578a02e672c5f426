/* The test suite's user kernel (deepgrid/kernel.h): a nonlinear coupled scheme of two state
 * fields (a keeping two levels, b) and a coefficient field k, with different radii along x, y
 * and z and terms that depend on the global position and the step. Built in variants that
 * loaders must refuse: TEST_KERNEL_ABI (another ABI version), TEST_KERNEL_NOT_A_KERNEL (no
 * dg_kernel_describe), TEST_KERNEL_F32_ONLY (no f64 version). */
#include <deepgrid/kernel.h>

#ifndef TEST_KERNEL_ABI
#define TEST_KERNEL_ABI DG_KERNEL_ABI_VERSION
#endif

enum { A = 0, A1 = 1, B = 2, K = 3, COMPONENTS = 4, RX = 2, RY = 1, RZ = 2 };

/* A source term of position and time: small, different at every point of a plane and step. */
#define SOURCE(x, y, z) (0.001 * (double)(((x) * 3 + (y) * 5 + (z) * 7) % 11))

/* Input component c at offset (dx, dy, dz) of point (i, j). */
#define IN(c, dx, dy, dz) args->in[((dz) + RZ) * COMPONENTS + (c)][((j) + (dy)) * s + (i) + (dx)]

#define TEST_KERNEL_APPLY(T)                                                                  \
  const ptrdiff_t s = args->in_stride;                                                        \
  for (int64_t j = 0; j < args->height; ++j) {                                                \
    for (int64_t i = 0; i < args->width; ++i) {                                               \
      const T a = IN(A, 0, 0, 0), b = IN(B, 0, 0, 0), k = IN(K, 0, 0, 0);                     \
      const T lap = IN(A, -2, 0, 0) + IN(A, 1, 0, 0) + IN(A, 0, -1, 0) + IN(A, 0, 1, 0) +     \
                    IN(A, 0, 0, -2) + IN(A, 0, 0, 2) - (T)6 * a;                              \
      const T src = (T)SOURCE(args->x0 + i, args->y0 + j, args->z + args->step);             \
      args->out[0][j * args->out_stride + i] =                                                \
          a + k * lap + (T)0.1 * a * b - (T)0.05 * IN(A1, 0, 0, 0) + src;                     \
      args->out[1][j * args->out_stride + i] =                                                \
          b * ((T)1 - (T)0.2 * a * a) +                                                       \
          (T)0.05 * (IN(B, 2, 0, 0) + IN(B, 0, 0, -1) - (T)2 * b) + (T)0.0001 * (T)(args->x0 + i); \
    }                                                                                         \
  }

DG_KERNEL_EXPORT void dg_kernel_apply_f32(const dg_kernel_args_f32* args) {
  TEST_KERNEL_APPLY(float)
}

#ifndef TEST_KERNEL_F32_ONLY
DG_KERNEL_EXPORT void dg_kernel_apply_f64(const dg_kernel_args_f64* args) {
  TEST_KERNEL_APPLY(double)
}
#define TEST_KERNEL_DTYPES (DG_KERNEL_F32 | DG_KERNEL_F64)
#else
#define TEST_KERNEL_DTYPES DG_KERNEL_F32
#endif

#ifndef TEST_KERNEL_NOT_A_KERNEL
static const dg_kernel_field fields[] = {
    {"a", 2, 0, 0},
    {"b", 1, 0, 0},
    {"k", 1, 1, 0.05},
};

static const dg_kernel_info info = {
    TEST_KERNEL_ABI, "testkernel", 3, fields, RX, RY, RZ, 24, TEST_KERNEL_DTYPES,
};

DG_KERNEL_EXPORT const dg_kernel_info* dg_kernel_describe(void) { return &info; }
#endif
