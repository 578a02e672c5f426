// internal: the SEG-Y writer of traces_file.h with the size of its pieces settable, so that
// tests can take a small file through several pieces of rows and of traces.
#pragma once

#include <cstddef>
#include <string>

#include "deepgrid/traces_file.h"

namespace deepgrid::internal {

// write_traces_segy(npy_path, ...) holding about `chunk_bytes` of values at a time (>= 1).
Status write_traces_segy_in_chunks(const std::string& npy_path, const Probes& probes,
                                   const std::string& out, const SegyOptions& options,
                                   size_t chunk_bytes);

}  // namespace deepgrid::internal
