#include "cli/grid_fields.h"

#include <optional>

#include "core/sha256.h"
#include "deepgrid/scheme.h"

namespace deepgrid::cli {

namespace {

// The name in the grid's scheme record, read without loading a kernel library it may name;
// empty without one.
std::string recorded_name(const Manifest& m) {
  const auto record = nlohmann::json::parse(m.scheme, nullptr, /*allow_exceptions=*/false);
  if (record.is_object() && record.contains("name") && record["name"].is_string()) {
    return record["name"].get<std::string>();
  }
  return "";
}

// "u, u@1, m (scheme wave8)"; empty for one field.
std::string field_list(const Manifest& m) {
  if (m.fields.empty()) return "";
  std::string s;
  for (size_t i = 0; i < m.fields.size(); ++i) s += (i ? ", " : "") + m.fields[i];
  const std::string name = recorded_name(m);
  return name.empty() ? s : s + " (scheme " + name + ")";
}

}  // namespace

std::string fields_text(const Manifest& m) {
  if (!m.fields.empty()) return ", fields " + field_list(m);
  const std::string name = recorded_name(m);
  return name.empty() ? "" : ", stencil " + name;
}

std::string fields_lines(const Manifest& m) {
  if (!m.fields.empty()) return "fields      " + field_list(m) + "\n";
  const std::string name = recorded_name(m);
  return name.empty() ? "" : "stencil     " + name + " (its own: run it without --stencil)\n";
}

namespace {

// The pin and what the file at its path holds now.
struct KernelState {
  KernelPin pin;
  Result<std::string> now;
};

std::optional<KernelState> kernel_state(const Manifest& m) {
  auto pin = kernel_pin_of(m.scheme);
  if (!pin) return std::nullopt;
  return KernelState{*pin, internal::sha256_of_path(pin->path)};
}

}  // namespace

std::string kernel_lines(const Manifest& m) {
  const auto k = kernel_state(m);
  if (!k) return "";
  std::string verdict;
  if (!k->now.ok()) {
    verdict = "the file cannot be read: " + k->now.status().message();
  } else if (k->pin.sha256.empty()) {
    verdict = "none recorded; the file has " + *k->now;
  } else {
    verdict = *k->now == k->pin.sha256 ? "recorded; the file matches, runs load it"
                                       : "recorded; the file now has " + *k->now +
                                             ", so runs refuse it until --kernel accepts it";
  }
  return "kernel      " + k->pin.path + " (its code runs in every run of this grid)\n" +
         "sha256      " + (k->pin.sha256.empty() ? "-" : k->pin.sha256) + " (" + verdict + ")\n";
}

nlohmann::json kernel_json(const Manifest& m) {
  const auto k = kernel_state(m);
  if (!k) return nullptr;
  return {{"path", k->pin.path},
          {"sha256", k->pin.sha256},
          {"file_sha256", k->now.ok() ? nlohmann::json(*k->now) : nlohmann::json(nullptr)},
          {"matches", k->now.ok() && *k->now == k->pin.sha256}};
}

Result<int> field_component(const Manifest& m, const std::string& field) {
  if (field.empty()) return 0;
  const int c = m.component_index(field);
  if (c < 0) {
    std::string names = m.fields.empty() ? "u (a grid of one field)" : "";
    for (size_t i = 0; i < m.fields.size(); ++i) names += (i ? ", " : "") + m.fields[i];
    return invalid_argument("the grid has no field '" + field + "'; its fields are " + names);
  }
  return c;
}

}  // namespace deepgrid::cli
