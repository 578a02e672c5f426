// SEG-Y traces (traces_file.h): written by deepgrid, read back with segyio's own reader —
// samples, binary and trace headers — from an array, from a .npy in several pieces, and from a
// run stopped part-way and resumed.
#include "store/traces_segy.h"

#include <gtest/gtest.h>
#include <segyio/segy.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "deepgrid/npy.h"
#include "deepgrid/run.h"
#include "deepgrid/scheme.h"
#include "deepgrid/traces_file.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

// What segyio reads back from a SEG-Y file.
struct ReadBack {
  std::vector<char> binary;
  std::vector<std::vector<char>> headers;
  std::vector<std::vector<float>> traces;
  std::string text;

  int32_t bfield(int field) const {
    int32_t v = 0;
    EXPECT_EQ(segy_get_bfield(binary.data(), field, &v), SEGY_OK);
    return v;
  }
  int32_t field(size_t trace, int f) const {
    int32_t v = 0;
    EXPECT_EQ(segy_get_field(headers[trace].data(), f, &v), SEGY_OK);
    return v;
  }
  // A coordinate field with the scalar at `scalar_field` applied.
  double scaled(size_t trace, int f, int scalar_field) const {
    const int32_t s = field(trace, scalar_field);
    const double v = field(trace, f);
    return s < 0 ? v / -s : s > 0 ? v * s : v;
  }
};

ReadBack read_segy(const std::string& path) {
  ReadBack r;
  segy_file* fp = segy_open(path.c_str(), "rb");
  EXPECT_NE(fp, nullptr) << path;
  if (fp == nullptr) return r;
  r.binary.resize(SEGY_BINARY_HEADER_SIZE);
  EXPECT_EQ(segy_binheader(fp, r.binary.data()), SEGY_OK);
  std::vector<char> text(SEGY_TEXT_HEADER_SIZE + 1);
  EXPECT_EQ(segy_read_textheader(fp, text.data()), SEGY_OK);
  r.text = text.data();
  const int samples = segy_samples(r.binary.data());
  const long trace0 = segy_trace0(r.binary.data());
  const int bsize = segy_trace_bsize(samples);
  int traces = 0;
  EXPECT_EQ(segy_traces(fp, &traces, trace0, bsize), SEGY_OK);
  for (int t = 0; t < traces; ++t) {
    std::vector<char> h(SEGY_TRACE_HEADER_SIZE);
    EXPECT_EQ(segy_traceheader(fp, t, h.data(), trace0, bsize), SEGY_OK);
    std::vector<float> v(static_cast<size_t>(samples));
    EXPECT_EQ(segy_readtrace(fp, t, v.data(), trace0, bsize), SEGY_OK);
    EXPECT_EQ(segy_to_native(SEGY_IEEE_FLOAT_4_BYTE, samples, v.data()), SEGY_OK);
    r.headers.push_back(std::move(h));
    r.traces.push_back(std::move(v));
  }
  segy_close(fp);
  return r;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Two sources (the first one's coordinates go in the headers) and three receivers.
Probes shot() {
  Probes p;
  SourceSpec s;
  s.x = 3, s.y = 4, s.z = 5;
  p.sources = {s, SourceSpec{}};
  p.receivers = {{"u", 7, 4, 5}, {"u", 9, 1, 2}, {"u@1", 0, 0, 11}};
  return p;
}

// steps x receivers values that float32 rounds, with a NaN (a step a crash lost).
std::vector<double> values_of(int64_t steps, int64_t receivers) {
  std::vector<double> v(static_cast<size_t>(steps * receivers));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37 * static_cast<double>(i)) / 3;
  v[5] = std::numeric_limits<double>::quiet_NaN();
  return v;
}

void expect_samples(const ReadBack& r, const std::vector<double>& values, int64_t steps) {
  const size_t receivers = r.traces.size();
  for (size_t t = 0; t < receivers; ++t) {
    ASSERT_EQ(r.traces[t].size(), static_cast<size_t>(steps));
    for (int64_t s = 0; s < steps; ++s) {
      const float want = static_cast<float>(values[static_cast<size_t>(s) * receivers + t]);
      ASSERT_TRUE(same_bits(r.traces[t][static_cast<size_t>(s)], want))
          << "trace " << t << " sample " << s;
    }
  }
}

TEST(SegyTraces, ReadBackBySegyioWithHeadersAndCoordinates) {
  const testing::TempDir tmp;
  const int64_t steps = 20;
  const Probes p = shot();
  const std::vector<double> v = values_of(steps, 3);
  SegyOptions o;
  o.dt = 0.0005;
  o.spacing = {2.5, 1.25, 0.1};
  o.grid = "g";
  o.first_step = 101;
  const std::string out = tmp / "t.sgy";
  ASSERT_TRUE(write_traces_segy(v, steps, 3, p, out, o).ok());
  const ReadBack r = read_segy(out);
  ASSERT_EQ(r.traces.size(), 3u);
  expect_samples(r, v, steps);
  EXPECT_TRUE(std::isnan(r.traces[2][1]));  // values[5]: step 1, receiver 2
  EXPECT_EQ(r.bfield(SEGY_BIN_FORMAT), SEGY_IEEE_FLOAT_4_BYTE);
  EXPECT_EQ(r.bfield(SEGY_BIN_INTERVAL), 500);
  EXPECT_EQ(r.bfield(SEGY_BIN_SAMPLES), steps);
  EXPECT_EQ(r.bfield(SEGY_BIN_SEGY_REVISION), 0x0100);
  EXPECT_EQ(r.bfield(SEGY_BIN_MEASUREMENT_SYSTEM), 1);
  for (size_t t = 0; t < 3; ++t) {
    const ReceiverSpec& m = p.receivers[t];
    EXPECT_EQ(r.field(t, SEGY_TR_SEQ_LINE), static_cast<int32_t>(t + 1));
    EXPECT_EQ(r.field(t, SEGY_TR_SEQ_FILE), static_cast<int32_t>(t + 1));
    EXPECT_EQ(r.field(t, SEGY_TR_FIELD_RECORD), 1);
    EXPECT_EQ(r.field(t, SEGY_TR_SAMPLE_INTER), 500);
    EXPECT_EQ(r.field(t, SEGY_TR_SAMPLE_COUNT), steps);
    EXPECT_DOUBLE_EQ(r.scaled(t, SEGY_TR_GROUP_X, SEGY_TR_SOURCE_GROUP_SCALAR), m.x * 2.5);
    EXPECT_DOUBLE_EQ(r.scaled(t, SEGY_TR_GROUP_Y, SEGY_TR_SOURCE_GROUP_SCALAR), m.y * 1.25);
    EXPECT_DOUBLE_EQ(r.scaled(t, SEGY_TR_RECV_GROUP_ELEV, SEGY_TR_ELEV_SCALAR), -0.1 * m.z);
    EXPECT_DOUBLE_EQ(r.scaled(t, SEGY_TR_SOURCE_X, SEGY_TR_SOURCE_GROUP_SCALAR), 3 * 2.5);
    EXPECT_DOUBLE_EQ(r.scaled(t, SEGY_TR_SOURCE_Y, SEGY_TR_SOURCE_GROUP_SCALAR), 4 * 1.25);
    EXPECT_DOUBLE_EQ(r.scaled(t, SEGY_TR_SOURCE_DEPTH, SEGY_TR_ELEV_SCALAR), 0.5);
  }
  EXPECT_EQ(r.field(0, SEGY_TR_SOURCE_GROUP_SCALAR), -1000);  // 1.25 / 2 needs 3 decimals
  EXPECT_EQ(r.field(0, SEGY_TR_ELEV_SCALAR), -10);
  EXPECT_EQ(r.text.rfind("C 1 Receiver traces written by deepgrid", 0), 0u) << r.text;
  EXPECT_NE(r.text.find("sample i is grid step 101 + i"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("Fields recorded: u, u@1"), std::string::npos) << r.text;
}

TEST(SegyTraces, ANpyFileGoesThroughInPiecesAsItWouldWhole) {
  const testing::TempDir tmp;
  const int64_t steps = 37;
  const Probes p = shot();
  const std::vector<double> v = values_of(steps, 3);
  const std::string npy = tmp / "t.npy";
  {
    Traces t = run_traces(0, steps, 3);
    t.values = v;
    ASSERT_TRUE(write_traces_npy(t, npy).ok());
  }
  SegyOptions o;
  o.dt = 0.002;
  // 64 bytes: 2 rows of values at a time, 4 samples: one trace at a time
  ASSERT_TRUE(internal::write_traces_segy_in_chunks(npy, p, tmp / "pieces.sgy", o, 64).ok());
  ASSERT_TRUE(write_traces_segy(npy, p, tmp / "whole.segy", o).ok());
  const ReadBack pieces = read_segy(tmp / "pieces.sgy"), whole = read_segy(tmp / "whole.segy");
  expect_samples(pieces, v, steps);
  expect_samples(whole, v, steps);
  EXPECT_EQ(pieces.headers, whole.headers);
  // whole metres, and a midpoint (CDP) of 1.5 m
  EXPECT_EQ(pieces.field(0, SEGY_TR_SOURCE_GROUP_SCALAR), -10);
}

TEST(SegyTraces, WhatSegyCannotHoldIsRefusedAndNothingIsWritten) {
  const testing::TempDir tmp;
  const Probes p = shot();
  SegyOptions o;
  o.dt = 0.001;
  EXPECT_TRUE(check_segy(o, 100, p, "--dt").ok());
  auto refused = [&](const SegyOptions& opt, int64_t steps, const Probes& probes,
                     const std::string& says) {
    const Status st = check_segy(opt, steps, probes, "--dt");
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << says;
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  };
  SegyOptions bad = o;
  bad.dt = 0;
  refused(bad, 100, p, "give --dt SECONDS > 0");
  bad.dt = 0.04;  // 40000 microseconds
  refused(bad, 100, p, "1 to 32767 microseconds");
  bad = o;
  bad.spacing = {1, 0, 1};
  refused(bad, 100, p, "spacing must be > 0");
  refused(o, kSegyMaxSamples + 1, p, "1 to 32767 samples per trace");
  refused(o, 100, Probes{p.sources, {}}, "no receivers");
  // Columns that are not the probes' receivers
  const std::vector<double> v(20 * 2, 0.0);
  Probes two = p;
  two.receivers.pop_back();
  const std::string out = tmp / "t.sgy";
  EXPECT_TRUE(write_traces_segy(v, 20, 2, two, out, o).ok());
  EXPECT_NE(write_traces_segy(v, 20, 2, p, out, o).message().find("2 columns"), std::string::npos);
  Traces t = run_traces(0, 20, 2);
  ASSERT_TRUE(write_traces_npy(t, tmp / "two.npy").ok());
  const Status st = write_traces_segy(tmp / "two.npy", p, tmp / "u.sgy", o);
  EXPECT_NE(st.message().find("2 columns but the probes list 3 receivers"), std::string::npos)
      << st.message();
  EXPECT_FALSE(std::filesystem::exists(tmp / "u.sgy"));
  EXPECT_FALSE(std::filesystem::exists(tmp / "u.sgy.tmp"));
}

TEST(SegyTraces, FormatsFollowTheExtension) {
  EXPECT_EQ(traces_format("a/t.npy").value(), TracesFormat::kNpy);
  EXPECT_EQ(traces_format("t.SGY").value(), TracesFormat::kSegy);
  EXPECT_EQ(traces_format("t.segy").value(), TracesFormat::kSegy);
  EXPECT_NE(traces_format("t.csv").status().message().find(".sgy / .segy"), std::string::npos);
  EXPECT_EQ(traces_npy_path("t.npy"), "t.npy");
  EXPECT_EQ(traces_npy_path("t.sgy"), "t.sgy.npy");
}

// A wave grid at rest with a shot, run 24 steps with SEG-Y traces: straight through, and
// stopped after its first pass then resumed; both SEG-Y files hold the straight run's values.
TEST(SegyTraces, ARunStoppedAndResumedWritesTheWholeRun) {
  const testing::TempDir tmp;
  Probes p;
  SourceSpec s;
  s.x = s.y = s.z = 8;
  s.frequency = 0.1;
  s.delay = 10;
  p.sources = {s};
  p.receivers = {{"u", 10, 8, 8}, {"u", 12, 8, 8}};
  auto make = [&](const std::string& dir) {
    CreateOptions co;
    co.shape = Shape{16, 16, 16};
    co.dtype = DType::kF64;
    const Scheme scheme = Scheme::preset("wave2").value();
    co.fields = initial_fields(scheme, {});
    co.fields.back().init = InitSpec{InitSpec::Kind::kConst, 0.2, 0};
    co.scheme = scheme.to_json();
    ASSERT_TRUE(Grid::create(dir, co).ok());
  };
  RunOptions opt;
  opt.steps = 24;
  opt.method = Method::kInCore;
  opt.bt = 4;
  opt.probes = p;
  opt.segy.dt = 0.001;
  make(tmp / "straight");
  opt.traces_path = tmp / "straight.sgy";
  ASSERT_TRUE(run_grid(tmp / "straight", opt).ok());
  make(tmp / "stopped");
  opt.traces_path = tmp / "stopped.sgy";
  opt.progress = [](int64_t, int64_t) { return false; };
  const auto stopped = run_grid(tmp / "stopped", opt);
  ASSERT_TRUE(stopped.ok()) << stopped.status().message();
  ASSERT_LT(stopped->step_to, 24);
  EXPECT_FALSE(std::filesystem::exists(tmp / "stopped.sgy"));  // not before the run's end
  opt.progress = {};
  const auto resumed = run_grid(tmp / "stopped", opt);  // the same call again
  ASSERT_TRUE(resumed.ok()) << resumed.status().message();
  const std::vector<double> v = read_traces_npy(tmp / "straight.sgy.npy").value().values;
  ASSERT_FALSE(std::isnan(v.back()));
  const ReadBack a = read_segy(tmp / "straight.sgy"), b = read_segy(tmp / "stopped.sgy");
  ASSERT_EQ(a.traces.size(), 2u);
  expect_samples(a, v, 24);
  expect_samples(b, v, 24);
  EXPECT_EQ(a.headers, b.headers);
  EXPECT_NE(b.text.find("sample i is grid step 1 + i"), std::string::npos) << b.text;
}

}  // namespace
}  // namespace deepgrid
