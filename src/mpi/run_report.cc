// The report of a distributed run: each rank's figures, gathered on every rank, and the global
// ones made from them (sums of the ranks' time and traffic; the machines' steal counted once
// per machine).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/process_stats.h"
#include "mpi/comm.h"
#include "mpi/distributed_grid.h"
#include "mpi/parts.h"

namespace deepgrid::mpi {

using nlohmann::json;

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankFigures, rank, method, engine_bt, band_rows, part_planes,
                                   seconds, compute_seconds, io_wait_seconds,
                                   io_wait_for_writes_seconds, exchange_seconds, wait_seconds,
                                   bytes_read, bytes_written, bytes_sent, engine_memory, host,
                                   stolen_cpu_seconds, cpus, io_backend, threads, device,
                                   device_placement, device_memory, device_bytes_copied,
                                   device_copy_seconds)

std::string RankFigures::to_json() const { return json(*this).dump(); }

RankFigures RankFigures::from_json(const std::string& text) {
  return json::parse(text).get<RankFigures>();
}

void record_machines_steal(const std::vector<RankFigures>& per_rank, RunReport* total) {
  std::map<std::string, const RankFigures*> machines;  // each host's largest figure
  for (const RankFigures& f : per_rank) {
    const RankFigures*& m = machines[f.host];
    if (m == nullptr || f.stolen_cpu_seconds > m->stolen_cpu_seconds) m = &f;
  }
  total->stolen_cpu_seconds = 0;
  total->cpus = 0;
  for (const auto& [host, f] : machines) {
    total->stolen_cpu_seconds += f->stolen_cpu_seconds;
    total->cpus += f->cpus;
  }
}

std::string DistributedRunReport::to_json() const {
  json j = json::parse(total.to_json());
  j["ranks"] = ranks;
  j["exchange_bt"] = exchange_bt;
  j["process_grid"] = process_grid;
  j["halo"] = halo;
  j["halo_planes"] = halo[kAxisZ];
  double exchange = 0, wait = 0;
  uint64_t sent = 0;
  json per = json::array();
  for (const RankFigures& f : per_rank) {
    per.push_back(json::parse(f.to_json()));
    exchange += f.exchange_seconds;
    wait += f.wait_seconds;
    sent += f.bytes_sent;
  }
  j["exchange_seconds"] = exchange;  // summed over ranks, like compute_seconds
  j["wait_seconds"] = wait;
  j["bytes_sent"] = sent;
  j["per_rank"] = std::move(per);
  return j.dump();
}

std::string DistributedRunReport::to_text() const {
  std::string out = total.to_text();
  char line[256];
  if (ranks == 1) {
    std::snprintf(line, sizeof line, "ranks       1 (process grid %s): one part, no halos\n",
                  process_grid.c_str());
  } else {
    std::snprintf(line, sizeof line,
                  "ranks       %d (process grid %s), halo exchange every %d steps (halos of %lld, "
                  "%lld, %lld points along x, y, z)\n",
                  ranks, process_grid.c_str(), exchange_bt, static_cast<long long>(halo[0]),
                  static_cast<long long>(halo[1]), static_cast<long long>(halo[2]));
  }
  out += line;
  // Ranks on several machines: which, with what each one's hypervisor took.
  const bool hosts = std::any_of(per_rank.begin(), per_rank.end(), [&](const RankFigures& f) {
    return f.host != per_rank.front().host;
  });
  out +=
      "rank  method  bands  planes  seconds  compute  disk-wait  exchange  waiting  read      "
      "written";
  out += hosts ? "   stolen  host\n" : "\n";
  for (const RankFigures& f : per_rank) {
    const std::string bands = f.band_rows > 0 ? std::to_string(f.band_rows) : "-";
    std::snprintf(
        line, sizeof line, "%4d  %-6s  %-5s  %6lld  %7.3f  %7.3f  %9.3f  %8.3f  %7.3f  %-8s  %-*s",
        f.rank, f.method.c_str(), bands.c_str(), static_cast<long long>(f.part_planes), f.seconds,
        f.compute_seconds, f.io_wait_seconds, f.exchange_seconds, f.wait_seconds,
        format_size(f.bytes_read).c_str(), hosts ? 8 : 0, format_size(f.bytes_written).c_str());
    out += line;
    if (hosts) {
      std::snprintf(line, sizeof line, " %7.3f  %s", f.stolen_cpu_seconds, f.host.c_str());
      out += line;
    }
    out += "\n";
  }
  return out;
}

void detail::add_advance(RankFigures* f, const RunReport& r) {
  f->method = r.method;
  f->threads = r.threads;
  f->engine_bt = r.bt;
  f->band_rows = r.band_rows;
  if (!r.io_backend.empty()) f->io_backend = r.io_backend;
  f->compute_seconds += r.compute_seconds;
  f->io_wait_seconds += r.io_wait_seconds;
  f->io_wait_for_writes_seconds += r.io_wait_for_writes_seconds;
  f->bytes_read += r.bytes_read;
  f->bytes_written += r.bytes_written;
  f->engine_memory = std::max(f->engine_memory, r.engine_memory);
  if (!r.device.empty()) {
    f->device = r.device;
    f->device_placement = r.device_placement;
  }
  f->device_memory = std::max(f->device_memory, r.device_memory);
  f->device_bytes_copied += r.device_bytes_copied;
  f->device_copy_seconds += r.device_copy_seconds;
}

void detail::add_exchange(RankFigures* f, const ExchangeStats& e) {
  f->exchange_seconds += e.seconds;
  f->bytes_read += e.bytes_read;
  f->bytes_written += e.bytes_written;
  f->bytes_sent += e.bytes_sent;
}

DistributedRunReport detail::gather_report(const RankFigures& mine, const DistributedManifest& m,
                                           const RunOptions& opt, int k, int64_t from, int64_t to,
                                           const RunRecord& run, bool direct_io) {
  DistributedRunReport report;
  report.ranks = size();
  report.exchange_bt = k;
  report.halo = exchanged_halo(opt.scheme, k, m.procs);
  report.process_grid = m.procs.to_string();
  for (const std::string& f : all_gather(mine.to_json())) {
    report.per_rank.push_back(RankFigures::from_json(f));
  }
  RunReport& t = report.total;
  t.method = "mpi:" + mine.method;
  describe_problem(&t, m.shape, m.dtype, opt);
  t.bt = k;
  t.tile = "process grid " + m.procs.to_string();
  t.step_from = from;
  t.step_to = to;
  t.steps = to - from;
  t.step_target = run.step_to;
  t.direct_io = direct_io;
  for (const RankFigures& f : report.per_rank) {
    t.compute_seconds += f.compute_seconds;
    t.io_wait_seconds += f.io_wait_seconds;
    t.io_wait_for_writes_seconds += f.io_wait_for_writes_seconds;
    t.bytes_read += f.bytes_read;
    t.bytes_written += f.bytes_written;
    t.engine_memory = std::max(t.engine_memory, f.engine_memory);  // --mem is each rank's
    t.threads = std::max(t.threads, f.threads);                    // and so is --threads
    t.band_rows = std::max(t.band_rows, f.band_rows);
    t.device_memory = std::max(t.device_memory, f.device_memory);  // --device-mem is each rank's
    t.device_bytes_copied += f.device_bytes_copied;
    t.device_copy_seconds += f.device_copy_seconds;
    for (auto [all, own] :
         {std::pair{&t.io_backend, &f.io_backend}, std::pair{&t.device, &f.device},
          std::pair{&t.device_placement, &f.device_placement}}) {
      if (!own->empty() && all->find(*own) == std::string::npos) {
        *all += (all->empty() ? "" : ", ") + *own;  // the ranks' own, each once
      }
    }
  }
  record_machines_steal(report.per_rank, &t);
  t.peak_memory = peak_resident_bytes();
  return report;
}

void detail::record_steal(double at_start, RankFigures* f) {
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  f->host.assign(name, static_cast<size_t>(length));
  RunReport machine;
  machine.record_steal_since(at_start);
  f->stolen_cpu_seconds = machine.stolen_cpu_seconds;
  f->cpus = machine.cpus;
}

}  // namespace deepgrid::mpi
