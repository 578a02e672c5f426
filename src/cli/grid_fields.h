// The command line's view of a grid's fields (store.h's Manifest::fields), shared by the
// commands on stored and on distributed grids.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "deepgrid/status.h"
#include "deepgrid/store.h"

namespace deepgrid::cli {

// ", fields u, u@1, m (scheme wave8)" for a grid of several fields, ", stencil 27pt" for one
// that records its stencil (create --scheme 27pt); empty otherwise.
std::string fields_text(const Manifest& m);

// The same as info's lines: "fields      u, u@1, m (scheme wave8)\n", "stencil     27pt (...)\n"
// or empty.
std::string fields_lines(const Manifest& m);

// The kernel library a grid's scheme names, checked without loading it (docs/security.md):
// for info, as lines ("kernel      PATH", "sha256      HASH (...)") and as JSON
// {"path", "sha256", "file_sha256", "matches"}; empty / null for a grid without one.
std::string kernel_lines(const Manifest& m);
nlohmann::json kernel_json(const Manifest& m);

// The component --field names; the first (a grid's current state) when none is named.
// kInvalidArgument naming the grid's fields when it has no such field.
Result<int> field_component(const Manifest& m, const std::string& field);

}  // namespace deepgrid::cli
