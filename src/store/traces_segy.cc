// SEG-Y rev 1 files of receivers' traces (traces_file.h), written with segyio's C library: the
// textual, binary and trace headers filled field by field, the samples converted to big-endian
// IEEE float32. docs/schemes.md says which header fields hold what.
#include "store/traces_segy.h"

#include <fcntl.h>
#include <segyio/segy.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <set>
#include <vector>

#include "core/file_util.h"

namespace deepgrid {

namespace {

// Bytes of values one piece of a conversion holds, read and transposed: a bound on its memory.
constexpr size_t kChunkBytes = size_t{32} << 20;

// Rows [row, row + count) of a (steps, receivers) float64 array, valid until the next call.
using RowSource = std::function<Result<const double*>(int64_t row, int64_t count)>;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// The sample interval in whole microseconds.
int64_t interval_us(double dt) { return std::llround(dt * 1e6); }

// How a group of coordinates (metres) is stored: round(v * factor), with SEG-Y's scalar code
// (1: as they are; -10^k: divide by 10^k).
struct Scalar {
  int32_t code = 1;
  double factor = 1;
};

// The scalar keeping `values` exact: 1 when they are whole, else -10^k for the smallest k <= 4
// that makes them whole (to 1e-6 of a unit); when none does, the finest that fits 32 bits.
Result<Scalar> scalar_for(const std::vector<double>& values, const std::string& what) {
  Scalar best;
  for (int k = 0; k <= 4; ++k) {
    const double factor = std::pow(10.0, k);
    bool fits = true, whole = true;
    for (const double v : values) {
      const double stored = v * factor;
      fits = fits && std::fabs(stored) <= std::numeric_limits<int32_t>::max();
      whole = whole && std::fabs(stored - std::round(stored)) <= 1e-6;
    }
    if (!fits) {
      if (k == 0) {
        return invalid_argument(what +
                                " beyond 2^31 metres do not fit SEG-Y's 32-bit fields; "
                                "give a smaller --spacing");
      }
      break;
    }
    best = Scalar{k == 0 ? 1 : -static_cast<int32_t>(factor), factor};
    if (whole) break;
  }
  return best;
}

int32_t stored(double v, const Scalar& s) {
  return static_cast<int32_t>(std::llround(v * s.factor));
}

// Where each trace's receiver and the first source lie, in metres, and how they are stored.
struct Geometry {
  std::vector<std::array<double, 3>> receivers;
  std::array<double, 3> source = {0, 0, 0};
  Scalar xy, depth;  // for bytes 73-88 and 181-188; for bytes 41-68
};

Result<Geometry> geometry_of(const Probes& probes, const std::array<double, 3>& spacing) {
  Geometry g;
  auto metres = [&](int64_t x, int64_t y, int64_t z) {
    return std::array<double, 3>{static_cast<double>(x) * spacing[0],
                                 static_cast<double>(y) * spacing[1],
                                 static_cast<double>(z) * spacing[2]};
  };
  if (!probes.sources.empty()) {
    const SourceSpec& s = probes.sources.front();
    g.source = metres(s.x, s.y, s.z);
  }
  std::vector<double> xy{g.source[0], g.source[1]}, depth{g.source[2]};
  for (const ReceiverSpec& r : probes.receivers) {
    g.receivers.push_back(metres(r.x, r.y, r.z));
    const auto& m = g.receivers.back();
    xy.insert(xy.end(), {m[0], m[1], (m[0] + g.source[0]) / 2, (m[1] + g.source[1]) / 2});
    depth.push_back(m[2]);
  }
  DG_ASSIGN_OR_RETURN(g.xy, scalar_for(xy, "coordinates"));
  DG_ASSIGN_OR_RETURN(g.depth, scalar_for(depth, "depths"));
  return g;
}

// The 40 lines of 80 columns of the textual header (ASCII; segyio writes it as EBCDIC).
std::string textual_header(const SegyOptions& o, int64_t steps, const Probes& probes,
                           const Geometry& g) {
  std::set<std::string> fields;
  for (const ReceiverSpec& r : probes.receivers) fields.insert(r.field);
  std::string field_list;
  for (const std::string& f : fields) field_list += (field_list.empty() ? "" : ", ") + f;
  char buf[160];
  std::vector<std::string> lines;
  auto line = [&](const char* fmt, auto... args) {
    if constexpr (sizeof...(args) == 0) {  // (a format without arguments is the line itself)
      lines.emplace_back(fmt);
    } else {
      std::snprintf(buf, sizeof buf, fmt, args...);
      lines.emplace_back(buf);
    }
  };
  line("Receiver traces written by deepgrid (SEG-Y rev 1, IEEE float32 big-endian)");
  line("Grid: %s", o.grid.empty() ? "not known (converted from a traces file)" : o.grid.c_str());
  line("Fields recorded: %s", field_list.c_str());
  line("Traces: %lld, one per receiver in the probes file's order",
       static_cast<long long>(probes.receivers.size()));
  if (o.first_step > 0) {
    line("Samples: %lld, one per step: sample i is grid step %lld + i",
         static_cast<long long>(steps), static_cast<long long>(o.first_step));
  } else {
    line("Samples: %lld, one per step of the run, from its first", static_cast<long long>(steps));
  }
  line("Sample interval: %.9g s per step (headers: %lld microseconds)", o.dt,
       static_cast<long long>(interval_us(o.dt)));
  line("Spacing: %.9g, %.9g, %.9g m per cell along x, y, z", o.spacing[0], o.spacing[1],
       o.spacing[2]);
  line("Coordinates: grid cell x spacing; z is depth below the grid's first plane");
  line("GroupX/Y (81-88): receiver x, y; ReceiverGroupElevation (41-44): -depth");
  line("SourceX/Y (73-80), SourceDepth (49-52): first source of %lld (none: 0)",
       static_cast<long long>(probes.sources.size()));
  line("CDP X/Y (181-188): midpoint; offset (37-40): horizontal, whole metres");
  line("Scalars: coordinates %d (71-72), depths %d (69-70)", g.xy.code, g.depth.code);
  line("NaN samples: steps a crash lost before they were saved");
  std::string text;
  for (int i = 0; i < 40; ++i) {
    std::snprintf(buf, sizeof buf, "C%2d ", i + 1);
    std::string l = buf;
    if (i == 38) {
      l += "SEG Y REV1";
    } else if (i == 39) {
      l += "END TEXTUAL HEADER";
    } else if (static_cast<size_t>(i) < lines.size()) {
      l += lines[static_cast<size_t>(i)];
    }
    for (char& c : l) {
      if (static_cast<unsigned char>(c) < 32 || static_cast<unsigned char>(c) > 126) c = '?';
    }
    l.resize(80, ' ');  // (a long grid path is cut at the column 80)
    text += l;
  }
  return text;
}

// segyio's status as ours, naming the file.
Status segy_status(int err, const char* what, const std::string& path) {
  if (err == SEGY_OK) return Status::Ok();
  return Status(ErrorCode::kIo, std::string(what) + " " + path + " failed (segyio error " +
                                    std::to_string(err) + ")");
}

Status write_headers(segy_file* fp, const SegyOptions& o, int64_t steps, const Probes& probes,
                     const Geometry& g, const std::string& path) {
  const std::string text = textual_header(o, steps, probes, g);
  DG_RETURN_IF_ERROR(segy_status(segy_write_textheader(fp, 0, text.c_str()), "writing", path));
  std::vector<char> bin(SEGY_BINARY_HEADER_SIZE, 0);
  const std::pair<int, int64_t> fields[] = {
      {SEGY_BIN_JOB_ID, 1},
      {SEGY_BIN_LINE_NUMBER, 1},
      {SEGY_BIN_TRACES, static_cast<int64_t>(probes.receivers.size())},
      {SEGY_BIN_INTERVAL, interval_us(o.dt)},
      {SEGY_BIN_INTERVAL_ORIG, interval_us(o.dt)},
      {SEGY_BIN_SAMPLES, steps},
      {SEGY_BIN_SAMPLES_ORIG, steps},
      {SEGY_BIN_FORMAT, SEGY_IEEE_FLOAT_4_BYTE},
      {SEGY_BIN_ENSEMBLE_FOLD, 1},
      {SEGY_BIN_SORTING_CODE, 1},        // as recorded
      {SEGY_BIN_MEASUREMENT_SYSTEM, 1},  // metres
      {SEGY_BIN_SEGY_REVISION, 0x0100},
      {SEGY_BIN_TRACE_FLAG, 1},  // every trace has the same length
  };
  for (const auto& [field, value] : fields) {
    DG_RETURN_IF_ERROR(segy_status(segy_set_bfield(bin.data(), field, static_cast<int32_t>(value)),
                                   "filling", path));
  }
  return segy_status(segy_write_binheader(fp, bin.data()), "writing", path);
}

// Trace r's header (SEGY_TRACE_HEADER_SIZE bytes).
Status fill_trace_header(char* h, int64_t r, int64_t steps, const SegyOptions& o,
                         const Probes& probes, const Geometry& g) {
  std::fill(h, h + SEGY_TRACE_HEADER_SIZE, 0);
  const auto& m = g.receivers[static_cast<size_t>(r)];
  const auto& s = g.source;
  const int32_t n = static_cast<int32_t>(r + 1);
  const std::pair<int, int32_t> fields[] = {
      {SEGY_TR_SEQ_LINE, n},
      {SEGY_TR_SEQ_FILE, n},
      {SEGY_TR_FIELD_RECORD, 1},
      {SEGY_TR_NUMBER_ORIG_FIELD, n},
      {SEGY_TR_ENERGY_SOURCE_POINT, probes.sources.empty() ? 0 : 1},
      {SEGY_TR_TRACE_ID, 1},  // seismic data
      {SEGY_TR_DATA_USE, 1},
      {SEGY_TR_OFFSET, static_cast<int32_t>(std::llround(std::hypot(m[0] - s[0], m[1] - s[1])))},
      {SEGY_TR_RECV_GROUP_ELEV, stored(-m[2], g.depth)},
      {SEGY_TR_SOURCE_DEPTH, stored(s[2], g.depth)},
      {SEGY_TR_ELEV_SCALAR, g.depth.code},
      {SEGY_TR_SOURCE_GROUP_SCALAR, g.xy.code},
      {SEGY_TR_SOURCE_X, stored(s[0], g.xy)},
      {SEGY_TR_SOURCE_Y, stored(s[1], g.xy)},
      {SEGY_TR_GROUP_X, stored(m[0], g.xy)},
      {SEGY_TR_GROUP_Y, stored(m[1], g.xy)},
      {SEGY_TR_COORD_UNITS, 1},  // length (metres, the binary header says)
      {SEGY_TR_SAMPLE_COUNT, static_cast<int32_t>(steps)},
      {SEGY_TR_SAMPLE_INTER, static_cast<int32_t>(interval_us(o.dt))},
      {SEGY_TR_CDP_X, stored((m[0] + s[0]) / 2, g.xy)},
      {SEGY_TR_CDP_Y, stored((m[1] + s[1]) / 2, g.xy)},
  };
  for (const auto& [field, value] : fields) {
    if (segy_set_field(h, field, value) != SEGY_OK) {
      return Status(ErrorCode::kIo, "segyio refused trace header field " + std::to_string(field));
    }
  }
  return Status::Ok();
}

// One SEG-Y file being written from a (steps, receivers) source of rows.
struct SegyWrite {
  segy_file* fp;
  const RowSource& rows;
  int64_t steps, receivers;
  const SegyOptions& o;
  const Probes& probes;
  const Geometry& g;
  const std::string& path;
  size_t chunk_bytes;

  // Writes traces [r0, r0 + n): their samples gathered from `rows` a bounded block of rows at
  // a time into `samples` (trace-major), then each trace's header and samples.
  Status traces(int64_t r0, int64_t n, std::vector<float>* samples) const {
    const int64_t block = std::max<int64_t>(
        1, static_cast<int64_t>(chunk_bytes / (sizeof(double) * static_cast<size_t>(receivers))));
    for (int64_t s0 = 0; s0 < steps; s0 += block) {
      const int64_t count = std::min(block, steps - s0);
      DG_ASSIGN_OR_RETURN(const double* v, rows(s0, count));
      for (int64_t s = 0; s < count; ++s) {
        const double* row = v + s * receivers + r0;
        for (int64_t c = 0; c < n; ++c) {
          (*samples)[static_cast<size_t>(c * steps + s0 + s)] = static_cast<float>(row[c]);
        }
      }
    }
    const int bsize = segy_trace_bsize(static_cast<int>(steps));
    const long trace0 = SEGY_TEXT_HEADER_SIZE + SEGY_BINARY_HEADER_SIZE;
    char header[SEGY_TRACE_HEADER_SIZE];
    for (int64_t c = 0; c < n; ++c) {
      float* trace = samples->data() + c * steps;
      DG_RETURN_IF_ERROR(fill_trace_header(header, r0 + c, steps, o, probes, g));
      segy_from_native(SEGY_IEEE_FLOAT_4_BYTE, steps, trace);
      const int traceno = static_cast<int>(r0 + c);
      DG_RETURN_IF_ERROR(
          segy_status(segy_write_traceheader(fp, traceno, header, trace0, bsize), "writing", path));
      DG_RETURN_IF_ERROR(
          segy_status(segy_writetrace(fp, traceno, trace, trace0, bsize), "writing", path));
    }
    return Status::Ok();
  }
};

// The SEG-Y file at `out` from `rows`, holding about `chunk_bytes` of values at a time: written
// to out.tmp, synced and renamed over `out`.
Status write_segy(const RowSource& rows, int64_t steps, int64_t receivers, const Probes& probes,
                  const std::string& out, const SegyOptions& o, size_t chunk_bytes = kChunkBytes) {
  const auto format = traces_format(out);
  if (!format.ok() || *format != TracesFormat::kSegy) {
    return invalid_argument(out + ": a SEG-Y file is named .sgy or .segy; rename it");
  }
  DG_RETURN_IF_ERROR(check_segy(o, steps, probes, "dt"));
  if (receivers != static_cast<int64_t>(probes.receivers.size())) {
    return invalid_argument("the traces have " + std::to_string(receivers) +
                            " columns but the probes list " +
                            std::to_string(probes.receivers.size()) +
                            " receivers: give the probes file of the run that recorded them");
  }
  DG_ASSIGN_OR_RETURN(const Geometry g, geometry_of(probes, o.spacing));
  const std::string tmp = out + ".tmp";
  ::unlink(tmp.c_str());  // (a leftover of a crash, or something planted there)
  segy_file* fp = segy_open(tmp.c_str(), "w+b");
  if (fp == nullptr) return errno_status(errno, "create", tmp);
  Status st = write_headers(fp, o, steps, probes, g, tmp);
  const SegyWrite w{fp, rows, steps, receivers, o, probes, g, tmp, chunk_bytes};
  // Traces a chunk at a time: as many as chunk_bytes of samples hold.
  const int64_t per_chunk = std::max<int64_t>(
      1, static_cast<int64_t>(chunk_bytes / (sizeof(float) * static_cast<size_t>(steps))));
  std::vector<float> samples(static_cast<size_t>(std::min(per_chunk, receivers) * steps));
  for (int64_t r0 = 0; r0 < receivers && st.ok(); r0 += per_chunk) {
    st = w.traces(r0, std::min(per_chunk, receivers - r0), &samples);
  }
  if (st.ok()) st = segy_status(segy_flush(fp, false), "writing", tmp);
  if (segy_close(fp) != SEGY_OK && st.ok()) {
    st = Status(ErrorCode::kIo, "closing " + tmp + " failed");
  }
  if (st.ok()) st = internal::fsync_path(tmp);
  if (st.ok() && ::rename(tmp.c_str(), out.c_str()) != 0) st = errno_status(errno, "rename", tmp);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  const std::string dir = internal::parent_path(out);
  return internal::fsync_path(dir.empty() ? "." : dir);
}

}  // namespace

Result<TracesFormat> traces_format(std::string_view path) {
  const std::string name = lower(path);
  if (ends_with(name, ".npy")) return TracesFormat::kNpy;
  if (ends_with(name, ".sgy") || ends_with(name, ".segy")) return TracesFormat::kSegy;
  return invalid_argument("traces file " + std::string(path) +
                          ": unknown format; name it .npy (float64, steps x receivers) or .sgy / "
                          ".segy (SEG-Y rev 1)");
}

std::string traces_npy_path(const std::string& path) {
  const auto format = traces_format(path);
  return format.ok() && *format == TracesFormat::kSegy ? path + ".npy" : path;
}

Status check_segy(const SegyOptions& o, int64_t steps, const Probes& probes,
                  std::string_view dt_option) {
  const std::string dt_name(dt_option);
  if (probes.receivers.empty()) {
    return invalid_argument(
        "the probes have no receivers: SEG-Y traces need a probes file with \"receivers\" "
        "(docs/schemes.md)");
  }
  if (!(o.dt > 0) || !std::isfinite(o.dt)) {
    return invalid_argument("SEG-Y traces need the time per step: give " + dt_name +
                            " SECONDS > 0 (e.g. " + dt_name + " 0.001 for 1 ms)");
  }
  const int64_t us = interval_us(o.dt);
  if (us < 1 || us > kSegyMaxSamples) {
    char dt[32];
    std::snprintf(dt, sizeof dt, "%g", o.dt);
    return invalid_argument(dt_name + " " + dt +
                            " s is outside SEG-Y rev 1's sample intervals, 1 to 32767 "
                            "microseconds (0.000001 to 0.032767 s); give one within them");
  }
  for (const double h : o.spacing) {
    if (!(h > 0) || !std::isfinite(h)) {
      return invalid_argument(
          "the spacing must be > 0 metres per cell along each axis (--spacing DX[,DY,DZ])");
    }
  }
  if (steps < 1 || steps > kSegyMaxSamples) {
    return invalid_argument(std::to_string(steps) +
                            " steps of traces: SEG-Y rev 1 holds 1 to 32767 samples per trace; "
                            "write .npy traces, or run fewer steps at a time");
  }
  return Status::Ok();
}

Status write_traces_segy(std::span<const double> values, int64_t steps, int64_t receivers,
                         const Probes& probes, const std::string& out, const SegyOptions& options) {
  if (steps < 0 || receivers < 0 || values.size() != static_cast<size_t>(steps * receivers)) {
    return invalid_argument("the traces hold " + std::to_string(values.size()) +
                            " values, not steps x receivers = " + std::to_string(steps) + " x " +
                            std::to_string(receivers));
  }
  const RowSource rows = [&](int64_t row, int64_t) -> Result<const double*> {
    return values.data() + row * receivers;
  };
  return write_segy(rows, steps, receivers, probes, out, options);
}

Status write_traces_segy(const std::string& npy_path, const Probes& probes, const std::string& out,
                         const SegyOptions& options) {
  return internal::write_traces_segy_in_chunks(npy_path, probes, out, options, kChunkBytes);
}

Status internal::write_traces_segy_in_chunks(const std::string& npy_path, const Probes& probes,
                                             const std::string& out, const SegyOptions& options,
                                             size_t chunk_bytes) {
  DG_ASSIGN_OR_RETURN(const NpyHeader h, read_traces_header(npy_path));
  const int64_t steps = h.shape.ny, receivers = h.shape.nx;
  internal::OwnedFd fd;
  fd.fd = ::open(npy_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd.fd < 0) return errno_status(errno, "open", npy_path);
  std::vector<double> buffer;
  const RowSource rows = [&](int64_t row, int64_t count) -> Result<const double*> {
    buffer.resize(static_cast<size_t>(count * receivers));
    const auto row_bytes = static_cast<int64_t>(sizeof(double)) * receivers;
    DG_RETURN_IF_ERROR(internal::pread_full(fd.fd, buffer.data(),
                                            static_cast<size_t>(count * row_bytes),
                                            h.data_offset + row * row_bytes, npy_path));
    return buffer.data();
  };
  return write_segy(rows, steps, receivers, probes, out, options, chunk_bytes);
}

}  // namespace deepgrid
