#include "kernels/device_source.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string_view>

namespace deepgrid::internal {
namespace {

// `c` rounded to the dtype (a subnormal read as zero when `flush`), as an exact OpenCL C
// literal (hexadecimal).
std::string literal(double c, DType dtype, bool flush) {
  double v = dtype == DType::kF32 ? static_cast<double>(static_cast<float>(c)) : c;
  const double smallest =
      dtype == DType::kF32 ? std::numeric_limits<float>::min() : std::numeric_limits<double>::min();
  if (flush && std::fabs(v) < smallest) v = std::copysign(0.0, v);
  if (std::isinf(v)) return v > 0 ? "((T)INFINITY)" : "((T)-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a%s", v, dtype == DType::kF32 ? "f" : "");
  return std::string("(") + buf + ")";
}

// An operand: the value at an offset, read through D (zero for a subnormal when flushing).
std::string read(int component, int dx, int dy, int dz) {
  return "D(U(" + std::to_string(component) + ", " + std::to_string(dx) + ", " +
         std::to_string(dy) + ", " + std::to_string(dz) + "))";
}

// The update of every state field and the shift of older levels at the point, reading through
// U(c, dx, dy, dz) and writing through W(c): scheme.h's evaluation order, term by term, each
// operation through MUL and FMA (which flush subnormal results when asked).
std::string step_body(const Scheme& scheme, DType dtype, bool flush) {
  std::string b;
  for (const SchemeUpdate& up : scheme.updates()) {
    b += "  {\n    T acc;\n";
    for (size_t k = 0; k < up.terms.size(); ++k) {
      const SchemeTerm& t = up.terms[k];
      const auto& pts = t.stencil.points();
      b += "    {\n      T s = MUL(" + literal(pts[0].c, dtype, flush) + ", " +
           read(t.component, pts[0].dx, pts[0].dy, pts[0].dz) + ");\n";
      for (size_t i = 1; i < pts.size(); ++i) {
        b += "      s = FMA(" + literal(pts[i].c, dtype, flush) + ", " +
             read(t.component, pts[i].dx, pts[i].dy, pts[i].dz) + ", s);\n";
      }
      b += "      T q = " + literal(t.c, dtype, flush) + ";\n";
      for (int f : t.factors) b += "      q = MUL(q, " + read(f, 0, 0, 0) + ");\n";
      b += k == 0 ? "      acc = MUL(q, s);\n" : "      acc = FMA(q, s, acc);\n";
      b += "    }\n";
    }
    b += "    W(" + std::to_string(up.component) + ") = acc;\n  }\n";
  }
  // (Copies are not arithmetic: they keep subnormal numbers, as the CPU's do.)
  // A coefficient field carries itself: copied only when the launch asks (`copies`).
  for (const auto& [to, from] : scheme.carried()) {
    b += to == from ? "  if (copies) " : "  ";
    b += "W(" + std::to_string(to) + ") = U(" + std::to_string(from) + ", 0, 0, 0);\n";
  }
  return b;
}

// The arithmetic: IEEE's, or x86's with DAZ and FTZ (engines/subnormals.h), which the device
// emulates in IEEE arithmetic rather than trust its own flushing (NVIDIA's OpenCL flushes no
// f64 at all): operands read from memory go through D (a subnormal reads as zero); a result
// below the smallest normal number becomes a zero of its sign. x86 decides "below" on the
// result rounded to the dtype's precision with an unbounded exponent, so a result that rounds
// to exactly the smallest normal in the subnormal range is checked again, computed 2^32 times
// larger (exactly, and far from the subnormal range).
constexpr std::string_view kIeeeArithmetic = R"(#define D(v) (v)
#define MUL(a, b) ((a) * (b))
#define FMA(a, b, c) fma(a, b, c)
#define ADD(a, b) ((a) + (b))
)";
constexpr std::string_view kFlushedArithmetic = R"(#define SMALLEST (T)SMALLEST_NORMAL
#define SCALE ((T)4294967296.0)
inline T D(T v) { return fabs(v) < SMALLEST ? copysign((T)0, v) : v; }
inline T flushed(T r, T scaled) {
  if (fabs(r) > SMALLEST) return r;
  if (fabs(r) < SMALLEST) return copysign((T)0, r);
  return fabs(scaled) < SMALLEST * SCALE ? copysign((T)0, r) : r;
}
inline T MUL(T a, T b) {
  const T r = a * b;
  return fabs(r) > SMALLEST ? r : flushed(r, (a * SCALE) * b);
}
inline T FMA(T a, T b, T c) {
  const T r = fma(a, b, c);
  return fabs(r) > SMALLEST ? r : flushed(r, fma(a * SCALE, b, c * SCALE));
}
inline T ADD(T a, T b) {
  const T r = a + b;
  return fabs(r) > SMALLEST ? r : flushed(r, a * SCALE + b * SCALE);
}
)";

}  // namespace

int device_boundary_code(Boundary::Kind kind) {
  switch (kind) {
    case Boundary::Kind::kDirichlet:
      return 0;
    case Boundary::Kind::kNeumann:
      return 1;
    case Boundary::Kind::kPeriodic:
      return 2;
  }
  return 0;
}

DeviceSource device_step_source(const Scheme& scheme, DType dtype, bool flush_subnormals,
                                bool wide_indices, int z_points) {
  const std::string n = std::to_string(scheme.component_count());
  const std::string body = step_body(scheme, dtype, flush_subnormals);
  std::string s;
  s += "#pragma OPENCL FP_CONTRACT OFF\n";
  if (dtype == DType::kF64) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  s += std::string("typedef ") + (dtype == DType::kF32 ? "float" : "double") + " T;\n";
  s += std::string("typedef ") + (wide_indices ? "long" : "int") + " I;\n";
  s += "#define NC " + n + "\n";
  s += std::string("#define SMALLEST_NORMAL ") + (dtype == DType::kF32 ? "FLT_MIN" : "DBL_MIN") +
       "\n";
  s += flush_subnormals ? kFlushedArithmetic : kIeeeArithmetic;
  // Where index i along an axis of n points reads under the boundary rule of code `b`
  // (device_boundary_code; boundary.h's boundary_source_index). The rule is an argument, not
  // a variant of the program, so that one compiled program serves every boundary.
  // (`zslot`: the slot of the plane the boundary rule reads, which the caller finds.)
  s += "#define DIRICHLET " + std::to_string(device_boundary_code(Boundary::Kind::kDirichlet)) +
       "\n#define NEUMANN " + std::to_string(device_boundary_code(Boundary::Kind::kNeumann)) + "\n";
  s += R"(inline I source_index(I i, I n, int b) {
  if (i >= 0 && i < n) return i;
  if (b == DIRICHLET) return -1;
  if (b == NEUMANN) return i < 0 ? 0 : n - 1;
  return ((i % n) + n) % n;  // periodic
}
__attribute__((noinline)) T read_outside(__global const T* in, int c, I x, I y, I z, I nx,
                                         I ny, I nz, T outside, int b, I zslot) {
  const I sx = source_index(x, nx, b), sy = source_index(y, ny, b), sz = source_index(z, nz, b);
  if (sx < 0 || sy < 0 || sz < 0) return outside;
  return in[((zslot * NC + c) * ny + sy) * nx + sx];
}
)";
  s += "#define RX " + std::to_string(scheme.radius_x()) + "\n";
  s += "#define RY " + std::to_string(scheme.radius_y()) + "\n";
  s += "#define RZ " + std::to_string(scheme.radius_z()) + "\n";
  s += "#define ZP " + std::to_string(z_points) + "\n";
  s += R"(// Plane z of a buffer that holds its planes in a ring of `planes` (z0, the launch's first
// plane, at slot0): its slot, from the launch's plane offset (a launch spans at most a ring).
inline I slot(I j, I slot0, I planes) {
  const I s = slot0 + j;
  return s < 0 ? s + planes : s >= planes ? s - planes : s;
}
__kernel void dg_step(__global const T* restrict in, __global T* restrict out, const I nx,
                      const I ny, const I nz, const T outside, const I x_end, const I y_end,
                      const I z_end, const I z_begin, const I in_planes, const I out_planes,
                      const I in_slot0, const I out_slot0, const int boundary,
                      const int copies) {
  const I x = (I)get_global_id(0), y = (I)get_global_id(1);
  if (x >= x_end || y >= y_end) return;  // past the range, in its last groups
  const I field = nx * ny, row = y * nx + x;
#pragma unroll
  for (int k = 0; k < ZP; ++k) {
    const I j = (I)get_global_id(2) * ZP + k, z = z_begin + j;  // the launch's j-th plane
    if (z >= z_end) return;
    const I zin = slot(j, in_slot0, in_planes);
#define W(c) out[(slot(j, out_slot0, out_planes) * NC + (c)) * field + row]
    if (x >= RX && x < nx - RX && y >= RY && y < ny - RY && z >= RZ && z < nz - RZ) {
#define U(c, dx, dy, dz) \
  in[(slot(dz, zin, in_planes) * NC + (c)) * field + row + (dy) * nx + (dx)]
)";
  s += body;
  s += R"(#undef U
    } else {
#define U(c, dx, dy, dz)                                                                   \
  read_outside(in, c, x + (dx), y + (dy), z + (dz), nx, ny, nz, outside, boundary,           \
               slot(source_index(z + (dz), nz, boundary) - z, zin, in_planes))
)";
  s += body;
  s += R"(#undef U
    }
#undef W
  }
}

// The probes of a launch: entries [begin, end) of the pass's list, in order.
__kernel void dg_add_sources(__global T* u, __global const long* at, __global const T* a,
                             const int begin, const int end) {
  for (int i = begin; i < end; ++i) u[at[i]] = ADD(D(u[at[i]]), D(a[i]));
}

__kernel void dg_record(__global const T* u, __global const long* at, __global T* values,
                        const int begin, const int end) {
  for (int i = begin; i < end; ++i) values[i] = u[at[i]];
}
)";
  return {s, "-cl-std=CL1.2"};
}

}  // namespace deepgrid::internal
