#include "deepgrid/scheme.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/file_util.h"
#include "core/sha256.h"
#include "model/kernel_library.h"

namespace deepgrid {
namespace {

using nlohmann::json;

// Central-difference weights of the second derivative (unit spacing), centre first:
// orders 2, 4 and 8 in space.
const std::vector<double>& second_derivative_weights(int order) {
  static const std::vector<double> w2 = {-2, 1};
  static const std::vector<double> w4 = {-5. / 2, 4. / 3, -1. / 12};
  static const std::vector<double> w8 = {-205. / 72, 8. / 5, -1. / 5, 8. / 315, -1. / 560};
  return order == 2 ? w2 : order == 4 ? w4 : w8;
}

// The 3D Laplacian of the given order: sum over the axes of the second derivative.
Stencil laplacian(int order) {
  const std::vector<double>& w = second_derivative_weights(order);
  std::vector<StencilPoint> pts{{0, 0, 0, 3 * w[0]}};
  for (int d = 1; d < static_cast<int>(w.size()); ++d) {
    for (int sign : {-1, 1}) {
      pts.push_back({sign * d, 0, 0, w[static_cast<size_t>(d)]});
      pts.push_back({0, sign * d, 0, w[static_cast<size_t>(d)]});
      pts.push_back({0, 0, sign * d, w[static_cast<size_t>(d)]});
    }
  }
  return *Stencil::from_points(std::string("laplacian") + std::to_string(order), std::move(pts));
}

Stencil point_stencil() { return *Stencil::from_points("point", {{0, 0, 0, 1}}); }

// A term's stencil: a name (point, laplacian2/4/8, a stencil preset) or {"points": [...]}.
Result<Stencil> term_stencil(const json& j) {
  if (j.is_object()) return Stencil::from_json(j.dump(), j.value("name", "custom"));
  if (!j.is_string()) {
    return invalid_argument("a term's \"stencil\" must be a name or {\"points\": [...]}, not " +
                            j.dump());
  }
  const std::string name = j.get<std::string>();
  if (name == "point") return point_stencil();
  for (int order : {2, 4, 8}) {
    if (name == std::string("laplacian") + std::to_string(order)) return laplacian(order);
  }
  auto preset = Stencil::preset(name);
  if (!preset.ok()) {
    return invalid_argument("unknown stencil '" + name +
                            "' in a term; use point, laplacian2, laplacian4, laplacian8, a "
                            "stencil preset or {\"points\": [...]}");
  }
  return preset;
}

bool valid_name(const std::string& n) {
  if (n.empty() || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
  for (char ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
  }
  return true;
}

std::string component_name(const std::string& field, int level) {
  return level == 0 ? field : field + "@" + std::to_string(level);
}

Result<SchemeField> parse_field(const json& j) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
    return invalid_argument("scheme field " + j.dump() +
                            " needs a \"name\"; write e.g. {\"name\": \"u\", \"levels\": 2}");
  }
  SchemeField f;
  f.name = j["name"].get<std::string>();
  if (!valid_name(f.name)) {
    return invalid_argument("scheme field name '" + f.name +
                            "' must be letters, digits and _ (not starting with a digit)");
  }
  if (j.contains("coefficient") && !j["coefficient"].is_boolean()) {
    return invalid_argument("field " + f.name + ": \"coefficient\" must be true or false");
  }
  f.coefficient = j.value("coefficient", false);
  if (j.contains("levels")) {
    if (!j["levels"].is_number_integer() || j["levels"].get<int64_t>() < 1 ||
        j["levels"].get<int64_t>() > kMaxFieldLevels) {
      return invalid_argument("field " + f.name + ": \"levels\" must be an integer from 1 to " +
                              std::to_string(kMaxFieldLevels));
    }
    f.levels = j["levels"].get<int>();
    if (f.coefficient && f.levels != 1) {
      return invalid_argument("field " + f.name +
                              " is a coefficient field; it has one level (drop \"levels\")");
    }
  }
  if (j.contains("value")) {
    if (!j["value"].is_number()) {
      return invalid_argument("field " + f.name + ": \"value\" must be a number");
    }
    f.value = j["value"].get<double>();
  }
  return f;
}

// A "fields" list: each field valid, no name twice.
Result<std::vector<SchemeField>> parse_fields(const json& list) {
  std::vector<SchemeField> fields;
  std::set<std::string> names;
  for (const json& f : list) {
    DG_ASSIGN_OR_RETURN(SchemeField field, parse_field(f));
    if (!names.insert(field.name).second) {
      return invalid_argument("scheme declares field " + field.name + " twice");
    }
    fields.push_back(field);
  }
  return fields;
}

json field_json(const SchemeField& f) {
  json jf{{"name", f.name}};
  if (f.coefficient) {
    jf["coefficient"] = true;
    jf["value"] = f.value;
  } else {
    jf["levels"] = f.levels;
  }
  return jf;
}

json fields_json(const std::vector<SchemeField>& fields) {
  json list = json::array();
  for (const SchemeField& f : fields) list.push_back(field_json(f));
  return list;
}

bool is_kernel_library(const std::string& path) {
  return path.ends_with(".so") || path.find(".so.") != std::string::npos;
}

}  // namespace

Scheme::Scheme(const Stencil& stencil) {
  name_ = stencil.name();
  fields_ = {SchemeField{"u"}};
  updates_ = {SchemeUpdate{0, {SchemeTerm{1, {}, 0, stencil}}}};
  (void)finish();  // a valid stencil makes a valid scheme
}

Result<Scheme> Scheme::from_json(std::string_view json_text, std::string name,
                                 std::string_view base_dir) {
  const char* kForm =
      "; expected {\"fields\": [{\"name\": \"u\"}, ...], \"update\": {\"u\": [terms]}} "
      "(docs/schemes.md)";
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("scheme JSON is malformed" + std::string(kForm));
  if (j.is_object() && j.contains("kernel")) return kernel_scheme(json_text, base_dir, false);
  if (!j.is_object() || !j.contains("fields") || !j["fields"].is_array() || !j.contains("update") ||
      !j["update"].is_object()) {
    return invalid_argument("scheme JSON needs \"fields\" and \"update\"" + std::string(kForm));
  }
  Scheme s;
  s.name_ = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : name;
  DG_ASSIGN_OR_RETURN(s.fields_, parse_fields(j["fields"]));
  if (s.fields_.empty()) return invalid_argument("scheme has no fields" + std::string(kForm));
  // Component indices are needed to resolve the terms: derive them first.
  for (const SchemeField& f : s.fields_) {
    for (int l = 0; l < f.levels; ++l) s.components_.push_back(component_name(f.name, l));
  }
  auto component_of = [&](const json& v, const std::string& what) -> Result<int> {
    if (!v.is_string()) return invalid_argument(what + " must be a field name, not " + v.dump());
    const int c = s.component_index(v.get<std::string>());
    if (c < 0) {
      return invalid_argument(what + " names '" + v.get<std::string>() +
                              "', which is not a field of the scheme (fields are declared in "
                              "\"fields\"; u@1 is u one step earlier)");
    }
    return c;
  };
  for (const auto& [field, terms] : j["update"].items()) {
    const int out = s.component_index(field);
    if (out < 0 || field.find('@') != std::string::npos) {
      return invalid_argument("\"update\" has an entry for '" + field +
                              "', which is not a state field of the scheme");
    }
    if (!terms.is_array() || terms.empty()) {
      return invalid_argument("the update of " + field + " must be a non-empty list of terms");
    }
    SchemeUpdate u{out, {}};
    for (const json& t : terms) {
      const std::string where = "a term of " + field + "'s update";
      if (!t.is_object() || !t.contains("field")) {
        return invalid_argument(where + " needs \"field\": " + t.dump());
      }
      SchemeTerm term;
      DG_ASSIGN_OR_RETURN(term.component, component_of(t["field"], where + "'s \"field\""));
      term.stencil = point_stencil();
      if (t.contains("stencil")) {
        auto st = term_stencil(t["stencil"]);
        if (!st.ok()) return st.status().with_context(where);
        term.stencil = *st;
      }
      const json coef = t.value("coef", json(1));
      bool have_constant = false;
      for (const json& c : coef.is_array() ? coef : json::array({coef})) {
        if (c.is_number() && !have_constant) {
          term.c = c.get<double>();
          have_constant = true;
        } else if (c.is_string()) {
          DG_ASSIGN_OR_RETURN(int f, component_of(c, where + "'s \"coef\""));
          term.factors.push_back(f);
        } else {
          return invalid_argument(where +
                                  ": \"coef\" must be a number, a field name or a list "
                                  "of one number and field names, not " +
                                  coef.dump());
        }
      }
      if (term.factors.size() > kMaxTermFactors) {
        return invalid_argument(where + " multiplies more than " + std::to_string(kMaxTermFactors) +
                                " fields; split the term");
      }
      u.terms.push_back(std::move(term));
    }
    s.updates_.push_back(std::move(u));
  }
  DG_RETURN_IF_ERROR(s.finish());
  return s;
}

Result<Scheme> Scheme::from_kernel(const std::string& library_path, const std::string& sha256) {
  DG_ASSIGN_OR_RETURN(std::shared_ptr<const KernelLibrary> lib,
                      KernelLibrary::open(library_path, sha256));
  Scheme s;
  auto used = s.use_kernel(std::move(lib));
  if (!used.ok()) return used.with_context("kernel library " + library_path);
  return s;
}

Result<Scheme> Scheme::kernel_scheme(std::string_view json_text, std::string_view base_dir,
                                     bool pinned) {
  const json j = json::parse(json_text);  // parsed before, by from_json
  if (!j["kernel"].is_string() || j.contains("update")) {
    return invalid_argument(
        "a scheme's \"kernel\" is the path of a kernel library (instead of \"update\"), e.g. "
        "{\"kernel\": \"./libgrayscott.so\"}");
  }
  std::filesystem::path path = j["kernel"].get<std::string>();
  const json sha = j.value("sha256", json(""));
  const std::string sha256 = sha.is_string() ? sha.get<std::string>() : sha.dump();
  if (!sha256.empty() && !internal::is_sha256_hex(sha256)) {
    return invalid_argument(
        "a scheme's \"sha256\" must be the kernel library's SHA-256 (64 hex "
        "digits); leave it out to take the library as it is");
  }
  if (pinned && (sha256.empty() || path.is_relative())) {
    return invalid_argument("the grid names kernel library " + path.string() +
                            " without its recorded SHA-256 (made before deepgrid pinned "
                            "kernels, or edited); check it is the code you mean to run, then "
                            "pass --kernel " +
                            path.string() + " to run it and record its hash");
  }
  if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
  DG_ASSIGN_OR_RETURN(Scheme s, from_kernel(path.string(), sha256));
  if (j.contains("name") && j["name"].is_string()) s.name_ = j["name"].get<std::string>();
  if (!j.contains("fields")) return s;
  // Declared fields must be the library's; their values (a new grid's) may differ.
  if (!j["fields"].is_array()) return invalid_argument("a scheme's \"fields\" must be a list");
  DG_ASSIGN_OR_RETURN(std::vector<SchemeField> declared, parse_fields(j["fields"]));
  auto without_values = [](std::vector<SchemeField> fields) {
    for (SchemeField& f : fields) f.value = 0;
    return fields_json(fields);
  };
  if (without_values(declared) != without_values(s.fields_)) {
    return invalid_argument("the scheme's \"fields\" " + j["fields"].dump() +
                            " differ from kernel " + s.name_ + "'s " +
                            fields_json(s.fields_).dump() + "; drop \"fields\" or match them");
  }
  for (size_t i = 0; i < declared.size(); ++i) {
    if (j["fields"][i].contains("value")) s.fields_[i].value = declared[i].value;
  }
  return s;
}

Status Scheme::use_kernel(std::shared_ptr<const KernelLibrary> kernel) {
  name_ = kernel->name();
  DG_ASSIGN_OR_RETURN(fields_, parse_fields(fields_json(kernel->fields())));
  kernel_ = std::move(kernel);
  return finish();
}

Status Scheme::check_dtype(DType dtype) const {
  return kernel_ ? kernel_->check_dtype(dtype) : Status::Ok();
}

Status Scheme::finish() {
  components_.clear();
  coefficient_.clear();
  carried_.clear();
  for (const SchemeField& f : fields_) {
    const int first = static_cast<int>(components_.size());
    for (int l = 0; l < f.levels; ++l) {
      components_.push_back(component_name(f.name, l));
      coefficient_.push_back(f.coefficient);
      if (l > 0) carried_.emplace_back(first + l, first + l - 1);
    }
    if (f.coefficient) carried_.emplace_back(first, first);
    const bool updated = std::any_of(updates_.begin(), updates_.end(),
                                     [&](const SchemeUpdate& u) { return u.component == first; });
    if (!f.coefficient && !updated && !kernel_) {
      return invalid_argument("state field " + f.name + " has no update; add \"" + f.name +
                              "\": [terms] to \"update\", or declare it \"coefficient\": true");
    }
    if (f.coefficient && updated) {
      return invalid_argument("coefficient field " + f.name +
                              " is read-only and cannot have an update");
    }
  }
  rx_ = kernel_ ? kernel_->radius_x() : 0;
  ry_ = kernel_ ? kernel_->radius_y() : 0;
  rz_ = kernel_ ? kernel_->radius_z() : 0;
  for (const SchemeUpdate& u : updates_) {
    for (const SchemeTerm& t : u.terms) {
      if (!std::isfinite(t.c))
        return invalid_argument("scheme " + name_ + " has a non-finite coef");
      rx_ = std::max(rx_, t.stencil.radius_x());
      ry_ = std::max(ry_, t.stencil.radius_y());
      rz_ = std::max(rz_, t.stencil.radius_z());
    }
  }
  is_stencil_ = !kernel_ && fields_.size() == 1 && fields_[0].levels == 1 &&
                !fields_[0].coefficient && updates_.size() == 1 && updates_[0].terms.size() == 1 &&
                updates_[0].terms[0].c == 1 && updates_[0].terms[0].factors.empty();
  return Status::Ok();
}

Result<Scheme> Scheme::preset(std::string_view name) {
  auto wave = [](int order) {
    return std::string("{\"name\": \"wave") + std::to_string(order) +
           "\", \"fields\": [{\"name\": \"u\", \"levels\": 2}, {\"name\": \"m\", "
           "\"coefficient\": true, \"value\": 0.1}], \"update\": {\"u\": [{\"coef\": 2, "
           "\"field\": \"u\"}, {\"coef\": -1, \"field\": \"u@1\"}, {\"coef\": \"m\", "
           "\"stencil\": \"laplacian" +
           std::to_string(order) + "\", \"field\": \"u\"}]}}";
  };
  if (name == "wave2" || name == "wave4" || name == "wave8") {
    return from_json(wave(name.back() - '0'));
  }
  if (name == "heat-var") {
    return from_json(
        "{\"name\": \"heat-var\", \"fields\": [{\"name\": \"u\"}, {\"name\": \"kappa\", "
        "\"coefficient\": true, \"value\": 0.1}], \"update\": {\"u\": [{\"field\": \"u\"}, "
        "{\"coef\": \"kappa\", \"stencil\": \"laplacian2\", \"field\": \"u\"}]}}");
  }
  std::string list;
  for (const auto& n : scheme_preset_names()) list += (list.empty() ? "" : ", ") + n;
  return invalid_argument("unknown scheme '" + std::string(name) + "'; use one of " + list +
                          " or a JSON file");
}

std::vector<FieldInit> initial_fields(const Scheme& scheme, const InitSpec& state) {
  std::vector<FieldInit> out;
  if (scheme.is_stencil()) return out;
  for (int c = 0; c < scheme.component_count(); ++c) {
    InitSpec init = state;
    if (scheme.is_coefficient(c)) {
      const std::string& name = scheme.components()[static_cast<size_t>(c)];
      for (const SchemeField& f : scheme.fields()) {
        if (f.name == name) init = InitSpec{InitSpec::Kind::kConst, f.value, 0};
      }
    }
    out.push_back({scheme.components()[static_cast<size_t>(c)], init});
  }
  return out;
}

std::vector<std::string> scheme_preset_names() { return {"wave2", "wave4", "wave8", "heat-var"}; }

Result<Scheme> Scheme::from_record(std::string_view json_text, std::string name,
                                   std::string_view base_dir) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("points")) {
    DG_ASSIGN_OR_RETURN(Stencil st, Stencil::from_json(json_text, std::move(name)));
    return Scheme(st);
  }
  return from_json(json_text, std::move(name), base_dir);
}

Result<Scheme> Scheme::from_grid_record(std::string_view json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("kernel")) return kernel_scheme(json_text, {}, true);
  return from_record(json_text);
}

std::optional<KernelPin> kernel_pin_of(std::string_view scheme_record) {
  const json j = json::parse(scheme_record, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("kernel") || !j["kernel"].is_string()) return std::nullopt;
  const json sha = j.value("sha256", json(""));
  return KernelPin{j["kernel"].get<std::string>(), sha.is_string() ? sha.get<std::string>() : ""};
}

Result<Scheme> Scheme::resolve(std::string_view name_or_file) {
  const std::string s(name_or_file);
  if (is_kernel_library(s)) return from_kernel(s);
  if (!names_json_file(s)) {
    if (auto st = Stencil::preset(s); st.ok()) return Scheme(*st);
    if (auto sc = preset(s); sc.ok()) return sc;
    std::string list;
    for (const auto& n : preset_names()) list += n + ", ";
    for (const auto& n : scheme_preset_names()) list += n + ", ";
    return invalid_argument("unknown stencil or scheme '" + s + "'; use one of " + list +
                            "or a JSON file");
  }
  auto text = internal::read_small_file(s);
  if (!text.ok()) {
    return invalid_argument("cannot read stencil or scheme file '" + s +
                            "'; give a preset name or an existing JSON file");
  }
  auto r = from_record(*text, s, std::filesystem::path(s).parent_path().string());
  if (!r.ok()) return r.status().with_context(s);
  return r;
}

int Scheme::component_index(std::string_view name) const {
  for (size_t i = 0; i < components_.size(); ++i) {
    if (components_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

bool Scheme::is_coefficient(int component) const {
  return coefficient_[static_cast<size_t>(component)];
}

int Scheme::points() const {
  if (kernel_) {
    const auto state = std::count_if(fields_.begin(), fields_.end(),
                                     [](const SchemeField& f) { return !f.coefficient; });
    return static_cast<int>(state) * (1 + 2 * (rx_ + ry_ + rz_));
  }
  int n = 0;
  for (const SchemeUpdate& u : updates_) {
    for (const SchemeTerm& t : u.terms) n += t.stencil.size();
  }
  return n;
}

int Scheme::flops_per_update() const {
  if (is_stencil_) return stencil().flops_per_update();
  if (kernel_) return kernel_->flops_per_update();
  int flops = 0;
  for (const SchemeUpdate& u : updates_) {
    for (size_t k = 0; k < u.terms.size(); ++k) {
      const SchemeTerm& t = u.terms[k];
      // The stencil, the factors, and the term's product (first) or fused accumulation.
      flops += t.stencil.flops_per_update() + static_cast<int>(t.factors.size()) + (k ? 2 : 1);
    }
  }
  return flops;
}

std::string Scheme::to_json() const {
  if (is_stencil_) return stencil().to_json();
  const json fields = fields_json(fields_);
  if (kernel_) {
    return json{{"name", name_},
                {"kernel", kernel_->path()},
                {"sha256", kernel_->sha256()},
                {"fields", fields}}
        .dump();
  }
  json update = json::object();
  for (const SchemeUpdate& u : updates_) {
    json terms = json::array();
    for (const SchemeTerm& t : u.terms) {
      json coef = json::array({t.c});
      for (int f : t.factors) coef.push_back(components_[static_cast<size_t>(f)]);
      terms.push_back({{"coef", coef},
                       {"field", components_[static_cast<size_t>(t.component)]},
                       {"stencil", json::parse(t.stencil.to_json())}});
    }
    update[components_[static_cast<size_t>(u.component)]] = terms;
  }
  return json{{"name", name_}, {"fields", fields}, {"update", update}}.dump();
}

std::string Scheme::describe() const {
  if (is_stencil_) return stencil().describe();
  std::string f;
  for (const SchemeField& field : fields_) {
    f += (f.empty() ? "" : ", ") + field.name;
    if (field.levels > 1) f += std::string("[") + std::to_string(field.levels) + " levels]";
    if (field.coefficient) f += "[coefficient]";
  }
  if (kernel_) f += "; kernel " + kernel_->path();
  return name_ + " (fields " + f + "; radius " + std::to_string(radius()) + ")";
}

}  // namespace deepgrid
