// What a run keeps on disk so that a crash at any moment can be finished later.
//
// An in-place sweep (the stream engine) writes new plane z into the slot `spare` places behind
// old plane z's (store.h), so it destroys old plane z - spare, never a plane it still needs.
// While it runs, a SweepRecord in DIR/sweep.json says how far it has come: new planes [0, done)
// are durable and their hashes are in the record. A sweep of L steps needs the old planes
// [done - L rz, nz) to go on from there; the engine never writes plane z unless
// z < done + spare - L rz for a durable `done`, so after a crash they are intact. A periodic
// sweep also needs the old planes [0, L rz) at its end: they are copied into a side file before
// anything is overwritten.
//
// A RunRecord in DIR/run.json says what the whole run is to reach (its target step, stencil,
// boundary), so that `deepgrid run DIR --resume`, or the same command again, finishes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deepgrid/status.h"

namespace deepgrid {

struct SweepRecord {
  int64_t step_from = 0;  // the manifest's step when the sweep began
  int levels = 0;         // steps the sweep advances
  int64_t base_from = 0;  // the manifest's base when the sweep began
  int64_t spare = 0;      // the layout's spare slots (the distance between old and new plane)
  int64_t done = 0;       // new planes [0, done) are durable
  std::vector<uint64_t> hashes;   // checksums of new planes [0, done)
  std::string stencil;            // JSON of the stencil (a resumed sweep must use the same)
  std::string boundary;           // Boundary::to_string()
  bool flush_subnormals = false;  // RunOptions::flush_subnormals
  std::string side_file;  // periodic: old planes [0, min(nz, levels rz)), name in the grid dir
  std::string started;    // ISO 8601 UTC

  // The base the manifest gets when the sweep commits.
  int64_t base_to(int64_t slots) const { return ((base_from - spare) % slots + slots) % slots; }
  std::string to_json() const;
  static Result<SweepRecord> from_json(std::string_view text);
};

struct RunRecord {
  int64_t step_from = 0;  // the manifest's step when the run began
  int64_t step_to = 0;    // the step the run is to reach
  std::string stencil;    // JSON
  std::string boundary;
  std::string method;
  bool flush_subnormals = false;  // RunOptions::flush_subnormals
  std::string started;

  // "a run from step 0 to 24 (stream, boundary periodic) started ...", for messages.
  std::string describe() const;
  std::string to_json() const;
  static Result<RunRecord> from_json(std::string_view text);
};

// Whether two JSON texts hold the same value (records keep the stencil as JSON).
bool json_equal(std::string_view a, std::string_view b);

inline constexpr const char* kSweepRecordName = "sweep.json";
inline constexpr const char* kRunRecordName = "run.json";
inline constexpr const char* kSideFileName = "sweep.pinned";

}  // namespace deepgrid
