#include "deepgrid/resume.h"

#include <nlohmann/json.hpp>

#include "deepgrid/integrity.h"
#include "store/json_fields.h"

namespace deepgrid {
namespace {

using internal::integer_at;
using nlohmann::json;

// Parses `text` as a JSON object of the given format and hands it to `read`, turning a missing
// field or a wrong type into kCorrupt.
template <typename Read>
Status parse_record(std::string_view text, std::string_view format, Read read) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("format", "") != format) {
    return corrupt(std::string(format) + " record is not valid JSON (truncated or damaged)");
  }
  try {
    return read(j);
  } catch (const std::exception& e) {
    return corrupt(std::string(format) +
                   " record is missing a field or has a wrong type: " + e.what());
  }
}

}  // namespace

bool json_equal(std::string_view a, std::string_view b) {
  const json ja = json::parse(a, nullptr, false), jb = json::parse(b, nullptr, false);
  return !ja.is_discarded() && ja == jb;
}

std::string SweepRecord::to_json() const {
  json h = json::array();
  for (uint64_t v : hashes) h.push_back(hash_to_hex(v));
  const json j = {{"format", "deepgrid-sweep"},
                  {"step_from", step_from},
                  {"levels", levels},
                  {"base_from", base_from},
                  {"spare", spare},
                  {"done", done},
                  {"hashes", h},
                  {"stencil", json::parse(stencil)},
                  {"boundary", boundary},
                  {"flush_subnormals", flush_subnormals},
                  {"side_file", side_file},
                  {"started", started}};
  return j.dump() + "\n";
}

Result<SweepRecord> SweepRecord::from_json(std::string_view text) {
  SweepRecord r;
  DG_RETURN_IF_ERROR(parse_record(text, "deepgrid-sweep", [&](const json& j) -> Status {
    r.step_from = integer_at(j, "step_from");
    r.levels = static_cast<int>(std::clamp<int64_t>(integer_at(j, "levels"), 0, 1 << 20));
    r.base_from = integer_at(j, "base_from");
    r.spare = integer_at(j, "spare");
    r.done = integer_at(j, "done");
    for (const json& h : j.at("hashes")) {
      uint64_t v = 0;
      if (!hash_from_hex(h.get<std::string>(), &v)) {
        return corrupt("sweep record has a malformed hash '" + h.get<std::string>() + "'");
      }
      r.hashes.push_back(v);
    }
    r.stencil = j.at("stencil").dump();
    r.boundary = j.at("boundary").get<std::string>();
    r.flush_subnormals = j.value("flush_subnormals", false);  // (absent before 2026-11-25)
    r.side_file = j.at("side_file").get<std::string>();
    r.started = j.at("started").get<std::string>();
    if (!r.side_file.empty() && r.side_file != kSideFileName) {  // (a name a sweep creates)
      return corrupt("sweep record names side file '" + r.side_file.substr(0, 200) +
                     "'; deepgrid's is " + kSideFileName + " (docs/security.md)");
    }
    if (r.levels < 1 || r.done < 0 || r.spare < 0 || r.base_from < 0 ||
        static_cast<int64_t>(r.hashes.size()) != r.done) {
      return corrupt("sweep record is inconsistent (levels, done and hashes disagree)");
    }
    return Status::Ok();
  }));
  return r;
}

std::string RunRecord::describe() const {
  return "a run from step " + std::to_string(step_from) + " to " + std::to_string(step_to) + " (" +
         method + ", boundary " + boundary + (flush_subnormals ? ", subnormals flushed" : "") +
         ") started " + started;
}

std::string RunRecord::to_json() const {
  const json j = {{"format", "deepgrid-run"},
                  {"step_from", step_from},
                  {"step_to", step_to},
                  {"stencil", json::parse(stencil)},
                  {"boundary", boundary},
                  {"method", method},
                  {"flush_subnormals", flush_subnormals},
                  {"started", started}};
  return j.dump(2) + "\n";
}

Result<RunRecord> RunRecord::from_json(std::string_view text) {
  RunRecord r;
  DG_RETURN_IF_ERROR(parse_record(text, "deepgrid-run", [&](const json& j) -> Status {
    r.step_from = integer_at(j, "step_from");
    r.step_to = integer_at(j, "step_to");
    r.stencil = j.at("stencil").dump();
    r.boundary = j.at("boundary").get<std::string>();
    r.method = j.at("method").get<std::string>();
    r.flush_subnormals = j.value("flush_subnormals", false);  // (absent before 2026-11-25)
    r.started = j.at("started").get<std::string>();
    if (r.step_from < 0 || r.step_to < r.step_from) {
      return corrupt("run record has an invalid step range");
    }
    return Status::Ok();
  }));
  return r;
}

}  // namespace deepgrid
