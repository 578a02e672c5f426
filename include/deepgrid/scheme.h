// A scheme: the update rule of a simulation with one or several fields, what every engine runs.
//
// Fields are state fields, each keeping `levels` time levels (the wave equation's u keeps u(t)
// and u(t-1): levels 2), and read-only coefficient fields (a velocity model, a conductivity).
// A grid's plane holds one *component* per field level, in the order the fields are declared:
// u, u@1, ..., u@(levels-1), then the next field's; u@j is u as it was j steps earlier.
//
// One step computes, at every point p, each state field's new value as a sum of terms over the
// old components,
//   term = c * f_1[p] * f_2[p] * ... * S(g)[p]
// with c a constant, f_i coefficient or state components, and S a stencil applied to component
// g (default: the point itself). The older levels shift (new u@j = old u@(j-1)) and coefficient
// fields stay as they are.
//
// Evaluation order (the contract that makes every engine bitwise identical): per term,
// s = S(g) evaluated as stencil.h states, then q = c rounded to the dtype and q = q * f_i for
// each factor in order; the update is acc = q_0 * s_0 and acc = fma(q_k, s_k, acc) for
// k = 1, 2, ... A plain stencil is the scheme of one field with one term (c = 1, no factors),
// whose result is exactly the stencil's.
//
// A scheme may instead name a user's kernel library (deepgrid/kernel.h, docs/kernels.md): its
// fields and radii come from the library, which computes the state fields' new values; the
// shifting levels and the coefficient fields are carried as for any scheme.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deepgrid/dtype.h"
#include "deepgrid/init.h"
#include "deepgrid/status.h"
#include "deepgrid/stencil.h"

namespace deepgrid {

class KernelLibrary;

struct SchemeField {
  std::string name;
  int levels = 1;            // state fields: time levels kept (1 = only the current one)
  bool coefficient = false;  // read-only, constant in time
  double value = 0;          // coefficient fields: the value a new grid gets
};

struct SchemeTerm {
  double c = 1;
  std::vector<int> factors;  // components multiplied in, in order
  int component = 0;         // the component the stencil reads
  Stencil stencil;           // the point itself when the term has no stencil
};

struct SchemeUpdate {
  int component = 0;  // the state component written (a field's current level)
  std::vector<SchemeTerm> terms;
};

// Largest number of time levels a state field keeps, and of field factors in one term.
inline constexpr int kMaxFieldLevels = 8;
inline constexpr int kMaxTermFactors = 8;

// The kernel library a scheme's record names, read without loading it: what 'deepgrid info'
// shows, so that the code a grid would run can be checked before it runs.
struct KernelPin {
  std::string path;
  std::string sha256;  // empty in a record made before deepgrid pinned kernels
};
// The pin of a record naming a kernel library; nothing for any other record.
std::optional<KernelPin> kernel_pin_of(std::string_view scheme_record);

class Scheme {
 public:
  Scheme() = default;
  // The scheme of a plain stencil: one field "u", u' = S(u). NOLINT: a stencil is a scheme.
  Scheme(const Stencil& stencil);  // NOLINT(google-explicit-constructor)

  // Parses a scheme file's text (docs/schemes.md):
  //   {"name": ..., "fields": [{"name": "u", "levels": 2}, {"name": "m", "coefficient": true,
  //    "value": 0.1}], "update": {"u": [{"coef": 2, "field": "u"}, {"coef": -1, "field": "u@1"},
  //    {"coef": "m", "stencil": "laplacian8", "field": "u"}]}}
  // Validates with errors naming the offending entry (unknown field, level out of range, ...).
  // A user's kernel replaces "update": {"kernel": "./libk.so"} (relative to `base_dir`, the
  // JSON file's directory; "fields", if given, must match the library's).
  static Result<Scheme> from_json(std::string_view json_text, std::string name = "custom",
                                  std::string_view base_dir = {});
  // The scheme of a user's kernel library (its path); when `sha256` is given the library's file
  // must have that SHA-256 (checked before it is loaded).
  static Result<Scheme> from_kernel(const std::string& library_path,
                                    const std::string& sha256 = "");
  // A built-in scheme: wave2, wave4, wave8 (acoustic wave, 2nd/4th/8th order in space),
  // heat-var (heat diffusion with a conductivity field).
  static Result<Scheme> preset(std::string_view name);
  // A stencil preset, a scheme preset, a JSON file holding either, or a kernel library (.so).
  static Result<Scheme> resolve(std::string_view name_or_file);
  // Parses a stencil's or a scheme's JSON (records, files): to_json()'s output.
  static Result<Scheme> from_record(std::string_view json_text, std::string name = "custom",
                                    std::string_view base_dir = {});
  // The same for a record a grid holds (its manifest's scheme, an unfinished run's record),
  // which is data, not authority (docs/security.md): a kernel library it names must be named
  // by absolute path with its SHA-256, and is loaded only when its file has that hash.
  static Result<Scheme> from_grid_record(std::string_view json_text);

  const std::string& name() const { return name_; }
  const std::vector<SchemeField>& fields() const { return fields_; }
  const std::vector<SchemeUpdate>& updates() const { return updates_; }
  // Component names in plane order ("u", "u@1", "m").
  const std::vector<std::string>& components() const { return components_; }
  int component_count() const { return static_cast<int>(components_.size()); }
  // The index of a component name, or -1.
  int component_index(std::string_view name) const;
  bool is_coefficient(int component) const;
  // is_coefficient of every component, in plane order.
  const std::vector<bool>& coefficients() const { return coefficient_; }
  // Components carried unchanged into the next step's component: (to, from) pairs (older
  // levels shifting, coefficient fields staying).
  const std::vector<std::pair<int, int>>& carried() const { return carried_; }

  // A user's kernel (deepgrid/kernel.h): null for schemes of terms.
  const std::shared_ptr<const KernelLibrary>& kernel() const { return kernel_; }
  // Ok, or why this scheme cannot run on values of `dtype` (a kernel without that version).
  Status check_dtype(DType dtype) const;

  // A plain stencil (one field, one term S(u)): stencil() is it.
  bool is_stencil() const { return is_stencil_; }
  const Stencil& stencil() const { return updates_.front().terms.front().stencil; }

  int radius_x() const { return rx_; }
  int radius_y() const { return ry_; }
  int radius_z() const { return rz_; }
  int radius() const { return std::max({rx_, ry_, rz_}); }
  // Useful flops per point update: each term's stencil, factors and accumulation.
  int flops_per_update() const;
  // Stencil points read per point update, over all terms (a kernel: the star of its radius
  // per state field, as the library does not say).
  int points() const;
  // A stencil's own JSON (stencil.h) for a plain stencil, else the scheme JSON.
  std::string to_json() const;
  std::string describe() const;  // "wave8 (fields u[2 levels], m; radius 4)"

 private:
  Status finish();  // derives components, carried pairs and radii; validates
  Status use_kernel(std::shared_ptr<const KernelLibrary> kernel);
  // from_json's form naming a kernel library; `pinned`: it must carry the library's SHA-256.
  static Result<Scheme> kernel_scheme(std::string_view json_text, std::string_view base_dir,
                                      bool pinned);

  std::string name_;
  std::vector<SchemeField> fields_;
  std::vector<SchemeUpdate> updates_;
  std::shared_ptr<const KernelLibrary> kernel_;
  std::vector<std::string> components_;
  std::vector<bool> coefficient_;
  std::vector<std::pair<int, int>> carried_;
  bool is_stencil_ = false;
  int rx_ = 0, ry_ = 0, rz_ = 0;
};

// The components of a new grid for this scheme (CreateOptions::fields): state components start
// from `state` (older levels equal to the current one: at rest), coefficient fields at their
// declared value. Empty for a plain stencil, whose grid has one unnamed field.
std::vector<FieldInit> initial_fields(const Scheme& scheme, const InitSpec& state);

// Names of the scheme presets, for help texts.
std::vector<std::string> scheme_preset_names();

}  // namespace deepgrid
