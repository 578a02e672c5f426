/* deepgrid/kernel.h - the stable C interface of users' own kernels (docs/kernels.md).
 *
 * A kernel is a shared library that deepgrid loads at run time (a scheme JSON's "kernel", or
 * --scheme path/to/libkernel.so) and runs inside every engine: temporal blocking, out-of-core
 * streaming and resume happen around it. This header is plain C (C99 and C++), includes only
 * <stddef.h> and <stdint.h>, and is all a kernel is compiled against:
 *
 *   cc -shared -fPIC -O2 -ffp-contract=off -I<prefix>/include mykernel.c -o libmykernel.so
 *
 * A kernel library exports dg_kernel_describe() and at least one of dg_kernel_apply_f32() and
 * dg_kernel_apply_f64(), each declared below with DG_KERNEL_EXPORT.
 *
 * FIELDS AND COMPONENTS. The kernel declares its fields as a scheme does (deepgrid/scheme.h):
 * state fields, each keeping `levels` time levels (u, u@1 = u one step earlier, ...), and
 * read-only coefficient fields. A grid plane holds one component per field level, in the order
 * the fields are declared: u, u@1, ..., u@(levels-1), then the next field's.
 *
 * ONE CALL computes one rectangle [x0, x0 + width) x [y0, y0 + height) of plane z: the new
 * value of every state field (its current level) at every point of the rectangle, from the
 * input planes z - radius_z .. z + radius_z of every component. deepgrid itself shifts the
 * older levels (new u@j = old u@(j-1)) and carries the coefficient fields over; the kernel
 * writes only the new values.
 *
 * THE CONTRACT. A kernel must
 *   - be a pure function of its inputs: the same inputs, coordinates and step give the same
 *     bits;
 *     no global mutable state, no I/O, no randomness, no dependence on the call order;
 *   - be thread-safe: deepgrid calls it concurrently from several threads on disjoint outputs;
 *   - not write its inputs, and read them only within its declared radius of the rectangle;
 *   - handle any rectangle, down to 1 x 1, and give per-point results that do not depend on
 *     the rectangle (vectorize freely, but compute every point the same way: compile with
 *     -ffp-contract=off, or write fma() explicitly, so that a vector loop and its scalar tail
 *     round alike). This is what makes every engine, tile split and blocking depth bitwise
 *     identical;
 *   - return normally (no longjmp, no exceptions across the C boundary, no exit()).
 * Cells outside the grid are read through the run's boundary rule (dirichlet value, neumann
 * edge, periodic wrap); the kernel never sees the boundary, only ghost values around the
 * rectangle. It is called only for points inside the grid, with global coordinates.
 */
#ifndef DEEPGRID_KERNEL_H
#define DEEPGRID_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes. dg_kernel_info.abi_version must equal the loader's; any
 * change of the structures or functions below changes it. */
#define DG_KERNEL_ABI_VERSION 1

/* dg_kernel_info.dtypes: the value types the library's apply functions cover. */
#define DG_KERNEL_F32 1u
#define DG_KERNEL_F64 2u

/* The largest radius along each axis (deepgrid's kMaxStencilRadius) and number of components
 * (fields' levels together) a kernel may declare. */
#define DG_KERNEL_MAX_RADIUS 16
#define DG_KERNEL_MAX_COMPONENTS 64

#if defined(__GNUC__)
#define DG_KERNEL_VISIBLE __attribute__((visibility("default")))
#else
#define DG_KERNEL_VISIBLE
#endif
#ifdef __cplusplus
#define DG_KERNEL_EXPORT extern "C" DG_KERNEL_VISIBLE
#else
#define DG_KERNEL_EXPORT DG_KERNEL_VISIBLE
#endif

/* One field, as in a scheme JSON's "fields". */
typedef struct dg_kernel_field {
  const char* name; /* letters, digits and _, not starting with a digit */
  int levels;       /* state fields: time levels kept, 1..8; coefficient fields: 1 */
  int coefficient;  /* nonzero: a read-only coefficient field */
  double value;     /* coefficient fields: the value a new grid starts from */
} dg_kernel_field;

/* What dg_kernel_describe() returns: static data that lives as long as the library. */
typedef struct dg_kernel_info {
  int abi_version; /* DG_KERNEL_ABI_VERSION */
  const char* name;
  int field_count;
  const dg_kernel_field* fields;
  int radius_x, radius_y, radius_z; /* the reach of the inputs, 0..DG_KERNEL_MAX_RADIUS */
  int flops_per_update;             /* useful floating-point operations per point (reports) */
  unsigned dtypes;                  /* DG_KERNEL_F32 | DG_KERNEL_F64: what the library exports */
} dg_kernel_info;

/* The arguments of one call (single precision; dg_kernel_args_f64 is the same with double).
 *   in[(dz + radius_z) * components + c], dz in [-radius_z, radius_z]: component c of input
 *     plane z + dz, pointing at the rectangle's first point (x0, y0); point (x0 + i, y0 + j)
 *     is at [j * in_stride + i]; ghost cells are readable for i in [-radius_x, width +
 *     radius_x) and j in [-radius_y, height + radius_y).
 *   out[s]: the new value of the s-th state field (state fields in declaration order, their
 *     current level; coefficient fields have none), point (x0 + i, y0 + j) at
 *     [j * out_stride + i]. The kernel writes every point of the rectangle of every out[s].
 *   x0, y0, z: the rectangle's global position, 0 <= x0, x0 + width <= nx, likewise y;
 *     0 <= z < nz. For position-dependent physics (a source term, a layered model).
 *   nx, ny, nz: the grid's shape.
 *   step: the step being computed: the output is the state after step `step` (a grid's first
 *     step is 1; a run continuing a grid at step 100 computes 101, 102, ...). For
 *     time-dependent physics. */
typedef struct dg_kernel_args_f32 {
  const float* const* in;
  ptrdiff_t in_stride;
  float* const* out;
  ptrdiff_t out_stride;
  int64_t width, height;
  int64_t x0, y0, z;
  int64_t nx, ny, nz;
  int64_t step;
  int components;
} dg_kernel_args_f32;

typedef struct dg_kernel_args_f64 {
  const double* const* in;
  ptrdiff_t in_stride;
  double* const* out;
  ptrdiff_t out_stride;
  int64_t width, height;
  int64_t x0, y0, z;
  int64_t nx, ny, nz;
  int64_t step;
  int components;
} dg_kernel_args_f64;

/* The exported functions, by these exact names. */
DG_KERNEL_EXPORT const dg_kernel_info* dg_kernel_describe(void);
DG_KERNEL_EXPORT void dg_kernel_apply_f32(const dg_kernel_args_f32* args);
DG_KERNEL_EXPORT void dg_kernel_apply_f64(const dg_kernel_args_f64* args);

/* The types of those functions, for loaders. */
typedef const dg_kernel_info* (*dg_kernel_describe_fn)(void);
typedef void (*dg_kernel_apply_f32_fn)(const dg_kernel_args_f32*);
typedef void (*dg_kernel_apply_f64_fn)(const dg_kernel_args_f64*);

#ifdef __cplusplus
}
#endif

#endif /* DEEPGRID_KERNEL_H */
