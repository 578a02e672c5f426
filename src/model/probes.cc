#include "deepgrid/probes.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>
#include <numeric>

#include "core/file_util.h"

namespace deepgrid {
namespace {

using nlohmann::json;

Result<std::vector<int64_t>> point_of(const json& at, const std::string& what) {
  if (!at.is_array() || at.size() != 3 || !at[0].is_number_integer() ||
      !at[1].is_number_integer() || !at[2].is_number_integer()) {
    return invalid_argument(what + ": \"at\" must be [x, y, z] with integer indices, not " +
                            at.dump());
  }
  return std::vector<int64_t>{at[0].get<int64_t>(), at[1].get<int64_t>(), at[2].get<int64_t>()};
}

Result<SourceSpec> parse_source(const json& j) {
  const std::string what = "source " + j.dump();
  if (!j.is_object() || !j.contains("at")) return invalid_argument(what + " needs \"at\"");
  SourceSpec s;
  s.field = j.value("field", "u");
  DG_ASSIGN_OR_RETURN(const auto p, point_of(j["at"], what));
  s.x = p[0], s.y = p[1], s.z = p[2];
  if (const auto r = j.find("ricker"); r != j.end() && r->is_object()) {
    s.frequency = r->value("frequency", 0.0);
    s.delay = r->value("delay", 1.0 / std::max(s.frequency, 1e-9));
    s.amplitude = r->value("amplitude", 1.0);
    if (!(s.frequency > 0 && s.frequency <= 0.5)) {
      return invalid_argument(what +
                              ": the Ricker \"frequency\" is in cycles per step and must "
                              "be in (0, 0.5], e.g. 0.05");
    }
  } else if (const auto t = j.find("series"); t != j.end() && t->is_array()) {
    for (const json& v : *t) {
      if (!v.is_number()) return invalid_argument(what + ": \"series\" must hold numbers");
      s.series.push_back(v.get<double>());
    }
  } else {
    return invalid_argument(what +
                            " needs \"ricker\": {\"frequency\": F, \"delay\": T0} or "
                            "\"series\": [a1, a2, ...]");
  }
  return s;
}

}  // namespace

double SourceSpec::value(int64_t step) const {
  if (!series.empty()) {
    return step >= 1 && step <= static_cast<int64_t>(series.size())
               ? series[static_cast<size_t>(step - 1)]
               : 0.0;
  }
  const double a = std::numbers::pi * frequency * (static_cast<double>(step) - delay);
  return amplitude * (1 - 2 * a * a) * std::exp(-a * a);
}

Result<Probes> parse_probes(std::string_view json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return invalid_argument(
        "probes file is not a JSON object {\"sources\": [...], "
        "\"receivers\": [...]} (docs/schemes.md)");
  }
  Probes p;
  for (const json& s : j.value("sources", json::array())) {
    DG_ASSIGN_OR_RETURN(SourceSpec spec, parse_source(s));
    p.sources.push_back(std::move(spec));
  }
  for (const json& r : j.value("receivers", json::array())) {
    const std::string what = "receiver " + r.dump();
    if (!r.is_object() || !r.contains("at") || !r["at"].is_array()) {
      return invalid_argument(what + " needs \"at\": [x, y, z] or [[x, y, z], ...]");
    }
    const json& at = r["at"];
    const json points = !at.empty() && at[0].is_array() ? at : json::array({at});
    for (const json& pt : points) {
      DG_ASSIGN_OR_RETURN(const auto xyz, point_of(pt, what));
      p.receivers.push_back({r.value("field", "u"), xyz[0], xyz[1], xyz[2]});
    }
  }
  return p;
}

Result<Probes> read_probes(const std::string& path) {
  DG_ASSIGN_OR_RETURN(const std::string text, internal::read_small_file(path));
  auto p = parse_probes(text);
  if (!p.ok()) return p.status().with_context(path);
  return p;
}

Result<ResolvedProbes> resolve_probes(const Probes& probes, const Shape& shape,
                                      const std::vector<std::string>& components,
                                      const std::vector<bool>& constant) {
  ResolvedProbes out;
  auto resolve = [&](const std::string& field, int64_t x, int64_t y, int64_t z,
                     const std::string& what) -> Result<ProbePoint> {
    int c = -1;
    for (size_t i = 0; i < components.size(); ++i) {
      if (components[i] == field) c = static_cast<int>(i);
    }
    if (c < 0) return invalid_argument(what + " names field '" + field + "', which the grid lacks");
    if (x < 0 || y < 0 || z < 0 || x >= shape.nx || y >= shape.ny || z >= shape.nz) {
      return invalid_argument(what + " at (" + std::to_string(x) + ", " + std::to_string(y) + ", " +
                              std::to_string(z) + ") lies outside the grid " + shape.to_string());
    }
    return ProbePoint{c, x, y, z};
  };
  for (const SourceSpec& s : probes.sources) {
    DG_ASSIGN_OR_RETURN(const ProbePoint p, resolve(s.field, s.x, s.y, s.z, "a source"));
    if (static_cast<size_t>(p.component) < constant.size() &&
        constant[static_cast<size_t>(p.component)]) {
      return invalid_argument("a source adds to field '" + s.field +
                              "', a coefficient field (read-only, constant in time); add it to "
                              "a state field of the scheme");
    }
    out.sources.push_back(p);
    out.source_specs.push_back(&s);
  }
  for (const ReceiverSpec& r : probes.receivers) {
    DG_ASSIGN_OR_RETURN(const ProbePoint p, resolve(r.field, r.x, r.y, r.z, "a receiver"));
    out.receivers.push_back(p);
  }
  index_by_plane(&out);
  return out;
}

namespace {

// `points`' indices ordered by plane, then as given.
std::vector<uint32_t> by_plane(const std::vector<ProbePoint>& points) {
  std::vector<uint32_t> order(points.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&points](uint32_t a, uint32_t b) { return points[a].z < points[b].z; });
  return order;
}

std::span<const uint32_t> on_plane(const std::vector<ProbePoint>& points,
                                   const std::vector<uint32_t>& order, int64_t z) {
  if (order.size() != points.size()) {  // a caller's bug: it would lose probes silently
    std::fputs("deepgrid: internal error: probes used before index_by_plane()\n", stderr);
    std::abort();
  }
  const auto lo =
      std::partition_point(order.begin(), order.end(), [&](uint32_t i) { return points[i].z < z; });
  const auto hi =
      std::partition_point(lo, order.end(), [&](uint32_t i) { return points[i].z == z; });
  return {lo, hi};
}

}  // namespace

void index_by_plane(ResolvedProbes* p) {
  p->sources_by_z = by_plane(p->sources);
  p->receivers_by_z = by_plane(p->receivers);
}

std::span<const uint32_t> ResolvedProbes::sources_on(int64_t z) const {
  return on_plane(sources, sources_by_z, z);
}

std::span<const uint32_t> ResolvedProbes::receivers_on(int64_t z) const {
  return on_plane(receivers, receivers_by_z, z);
}

Status check_traces_destination(const ResolvedProbes& probes, const std::string& traces_path) {
  if (probes.receivers.empty()) return Status::Ok();
  if (traces_path.empty()) {
    return invalid_argument(
        "the probes have receivers; say where their values go with --traces OUT.npy");
  }
  return check_output_file(traces_path, "--traces " + traces_path);
}

Status check_output_file(const std::string& path, const std::string& what) {
  if (internal::is_directory(path)) {
    return invalid_argument(what + " is a directory; give a file name, e.g. " +
                            internal::join_path(path, "traces.npy"));
  }
  const std::string dir = internal::parent_path(path);
  if (!internal::is_directory(dir)) {
    return invalid_argument(what + ": directory " + dir +
                            " does not exist; create it or choose another path");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return invalid_argument(what + ": directory " + dir +
                            " is not writable; choose another path or fix its permissions");
  }
  return Status::Ok();
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

Traces run_traces(int64_t step_from, int64_t step_to, int64_t receivers, int64_t held_steps,
                  int64_t held_from) {
  Traces t;
  t.first_step = step_from + 1;
  t.held_from = held_from > 0 ? held_from : t.first_step;
  t.steps = step_to - step_from;
  t.receivers = receivers;
  const int64_t rows = held_steps > 0 ? std::min(held_steps, t.steps) : t.steps;
  t.values.assign(static_cast<size_t>(rows * t.receivers), kNaN);
  t.changed = std::vector<std::atomic<bool>>(static_cast<size_t>(rows));
  return t;
}

void hold_from(Traces* t, int64_t step) {
  if (step < t->held_from || step > t->held_from + t->capacity()) {
    std::fprintf(stderr,
                 "deepgrid: internal error: receivers' values of steps %lld..%lld were not all "
                 "held (a window of %lld steps)\n",
                 static_cast<long long>(t->held_from), static_cast<long long>(step - 1),
                 static_cast<long long>(t->capacity()));
    std::abort();
  }
  t->held_from = step;
  std::fill(t->values.begin(), t->values.end(), kNaN);
  for (std::atomic<bool>& c : t->changed) c.store(false, std::memory_order_relaxed);
}

Result<uint64_t> budget_beside_traces(uint64_t budget, int64_t rows, int64_t receivers,
                                      std::string_view whose) {
  const uint64_t bytes = static_cast<uint64_t>(rows * receivers) * sizeof(double);
  if (budget == 0 || bytes < budget) return budget == 0 ? 0 : budget - bytes;
  return invalid_argument(
      "the receivers' values take " + format_size(bytes) + " in memory (" + std::to_string(rows) +
      " steps x " + std::to_string(receivers) + " receivers x 8 bytes" +
      (whose.empty() ? std::string() : ", " + std::string(whose)) + "), all of --mem " +
      format_size(budget) + "; raise --mem, record fewer receivers, or hold fewer steps at a " +
      "time with a smaller --bt");
}

}  // namespace deepgrid
