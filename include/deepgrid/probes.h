// Point sources and receivers: a seismic shot's wavelet injected at a grid point, and the
// values a line of sensors records every step. They work inside temporal blocking: the engines
// apply them to each plane of each time level as the wavefront computes it (engines/wavefront.h).
//
// A source adds a(t) to a component at a point right after the update that computes step t
// (t counts from the grid's first step: the manifest's step + 1 is the first step a run
// computes). A receiver records a component's value at a point after every step.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "deepgrid/geometry.h"
#include "deepgrid/status.h"

namespace deepgrid {

struct SourceSpec {
  std::string field = "u";  // the component it adds to
  int64_t x = 0, y = 0, z = 0;
  // a(t): a Ricker wavelet A (1 - 2 pi^2 f^2 (t - t0)^2) exp(-pi^2 f^2 (t - t0)^2), f in cycles
  // per step, t0 in steps; or, when `series` is not empty, series[t - 1] (0 beyond its end).
  double frequency = 0, delay = 0, amplitude = 1;
  std::vector<double> series;

  double value(int64_t step) const;
};

struct ReceiverSpec {
  std::string field = "u";
  int64_t x = 0, y = 0, z = 0;
};

struct Probes {
  std::vector<SourceSpec> sources;
  std::vector<ReceiverSpec> receivers;
  bool empty() const { return sources.empty() && receivers.empty(); }
};

// Parses a probes file's text (docs/schemes.md):
//   {"sources": [{"field": "u", "at": [x, y, z], "ricker": {"frequency": 0.05, "delay": 25,
//                 "amplitude": 1}} | ... "series": [a1, a2, ...]],
//    "receivers": [{"field": "u", "at": [[x, y, z], ...]}]}
Result<Probes> parse_probes(std::string_view json_text);
// The same from a file.
Result<Probes> read_probes(const std::string& path);

// The probes resolved against a grid's components, for the engines: points checked inside the
// shape, fields turned into component indices.
struct ProbePoint {
  int component = 0;
  int64_t x = 0, y = 0, z = 0;
};

// What receivers recorded over a run's steps [first_step, first_step + steps): one row per
// step, one column per receiver, NaN where nothing was recorded (a resumed sweep does not
// recompute the planes finished before its interruption). Only a window of rows is held in
// memory, steps [held_from, held_from + held_steps()): a run holds one pass's (under mpirun,
// one round's), saves them and moves on (hold_from), so that its memory does not grow with
// its length. Engines write disjoint entries of the held rows from several threads.
struct Traces {
  int64_t first_step = 1;
  int64_t steps = 0;
  int64_t receivers = 0;
  int64_t held_from = 1;
  std::vector<double> values;  // values[(step - held_from) * receivers + r]
  // For write_traces_npy(): the file whose rows outside the window are this run's (it was
  // written whole, or the window was loaded from it), and which held rows changed since the
  // last save (at() sets a row's flag; threads recording one step share it).
  std::string saved_path;
  std::vector<std::atomic<bool>> changed;

  // Rows the window has room for, and those of them within the run.
  int64_t capacity() const { return static_cast<int64_t>(changed.size()); }
  int64_t held_steps() const {
    return std::max<int64_t>(0, std::min(capacity(), first_step + steps - held_from));
  }
  bool holds(int64_t step) const { return step >= held_from && step < held_from + held_steps(); }
  double* at(int64_t step, int64_t r) {
    const auto row = static_cast<size_t>(step - held_from);
    changed[row].store(true, std::memory_order_relaxed);
    return &values[row * static_cast<size_t>(receivers) + static_cast<size_t>(r)];
  }
};

struct ResolvedProbes {
  std::vector<ProbePoint> sources;
  std::vector<const SourceSpec*> source_specs;  // into the Probes it was resolved from
  std::vector<ProbePoint> receivers;
  Traces* traces = nullptr;  // where receivers record; null when there are none
  // Indices into sources and receivers, by plane (z), then as given (index_by_plane() fills
  // them): an engine looks at a plane's own probes only. Scanning every receiver at every
  // plane took 1.1 s of a 1.75 s run with 2048 receivers on 64x64 planes.
  std::vector<uint32_t> sources_by_z, receivers_by_z;

  bool empty() const { return sources.empty() && receivers.empty(); }
  // Indices of the sources, and of the receivers, on plane z (in the order given).
  std::span<const uint32_t> sources_on(int64_t z) const;
  std::span<const uint32_t> receivers_on(int64_t z) const;
};

// Fills p's indices by plane; every function that makes ResolvedProbes calls it last.
void index_by_plane(ResolvedProbes* p);

// Resolves `probes` (which must outlive the result) for a grid of `shape` whose components
// are `components` ({"u"} for a plain grid). Errors name the probe and say what is wrong.
// Components marked in `constant` (a scheme's coefficient fields: read-only, constant in time,
// and kept apart on disk) take receivers but no sources.
Result<ResolvedProbes> resolve_probes(const Probes& probes, const Shape& shape,
                                      const std::vector<std::string>& components,
                                      const std::vector<bool>& constant = {});

// Ok, or why the receivers of `probes` have nowhere to record: no traces file given, or one
// that cannot be written (a directory, or in a directory missing or not writable). Checked
// before a run changes anything: the first save comes only after its first pass.
Status check_traces_destination(const ResolvedProbes& probes, const std::string& traces_path);
// The same for any file about to be written at `path` (a directory there, a directory missing
// or not writable), named `what` in the message (e.g. "--traces out.npy").
Status check_output_file(const std::string& path, const std::string& what);

// Where an engine applies probes: `probes` (null: none) to a run whose state starts at
// absolute step `step` (level k of a pass starting there computes step + k), on a grid placed
// in a larger one as `placement` says (what users' kernels see, scheme_kernel.h).
struct ProbeRun {
  const ResolvedProbes* probes = nullptr;
  int64_t step = 0;
  GridPlacement placement = {};
};

// Traces of `receivers` over steps step_from + 1 .. step_to with room for `held_steps` rows
// (0: every step), holding those from `held_from` (0: step_from + 1) on, NaN.
Traces run_traces(int64_t step_from, int64_t step_to, int64_t receivers, int64_t held_steps = 0,
                  int64_t held_from = 0);

// Moves the window forward to hold the rows from `step` on, NaN; rows changed since the last
// save are dropped. Aborts (an internal error) when `step` lies before the window or beyond
// its room: the steps in between were never held, so an engine's pass was deeper than the
// window.
void hold_from(Traces* traces, int64_t step);

// What a run's --mem `budget` (0: none) leaves its engine beside receivers' values held in
// memory, `rows` x `receivers` doubles (`whose`, when not empty, says whose they are, in the
// error). An error, saying how to fix it, when they fill the budget.
Result<uint64_t> budget_beside_traces(uint64_t budget, int64_t rows, int64_t receivers,
                                      std::string_view whose = {});

}  // namespace deepgrid
