#include "mpi/halo_exchange.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/stopwatch.h"
#include "mpi/comm.h"
#include "store/plane_rect.h"

namespace deepgrid::mpi {
namespace {

using internal::seconds_since;

// One plane's rectangle of a transfer, and the round it travels in.
struct Slice {
  int from_rank = 0, to_rank = 0;
  Block from, to;  // one plane each, in the sender's and the receiver's part
  size_t bytes = 0;
  int64_t round = 0;
};

// What slice s adds to each rank's share of its round: its packed values on both sides (once
// for a rank's transfer to itself) and each of its planes the round does not hold yet.
std::map<int, uint64_t> charges(const Slice& s, const std::vector<std::set<int64_t>>& held,
                                const std::vector<uint64_t>& plane_bytes) {
  std::map<int, uint64_t> c;
  c[s.from_rank] += s.bytes;
  if (s.to_rank != s.from_rank) c[s.to_rank] += s.bytes;
  const std::set<std::pair<int, int64_t>> planes{{s.from_rank, s.from[kAxisZ].lo},
                                                 {s.to_rank, s.to[kAxisZ].lo}};
  for (const auto& [r, z] : planes) {
    if (held[static_cast<size_t>(r)].count(z) == 0) c[r] += plane_bytes[static_cast<size_t>(r)];
  }
  return c;
}

// The transfers cut into one slice per plane, in the order of the receiving plane counted
// from the receiver's lowest (a part's plane that sends x or y faces usually receives some
// too: both then fall in one round; and parts split along z send each other their z faces in
// the same rounds, so both read, send and write at once rather than one direction's rounds
// waiting for the other's: a 16 MiB-plane exchange 0.30-0.40 s to 0.18-0.23 s, measured),
// grouped into rounds: a new round starts when a slice would take its sender's or receiver's
// share of a round past `budget`. A rank's share is the packed values it sends and receives
// plus one copy of every plane of its part the round touches (each is read and written at most
// once per round); the parts' planes are `plane_bytes` (by rank) each.
std::vector<Slice> slices_in_rounds(const std::vector<BoxTransfer>& transfers,
                                    const std::vector<uint64_t>& plane_bytes,
                                    const internal::PlaneFormat& format, uint64_t budget) {
  std::vector<Slice> out;
  for (const BoxTransfer& t : transfers) {
    for (int64_t i = 0; i < t.from.size(kAxisZ); ++i) {
      Slice s{t.from_rank, t.to_rank, t.from, t.to, format.rect_bytes(t.from), 0};
      s.from[kAxisZ] = {t.from[kAxisZ].lo + i, t.from[kAxisZ].lo + i + 1};
      s.to[kAxisZ] = {t.to[kAxisZ].lo + i, t.to[kAxisZ].lo + i + 1};
      out.push_back(s);
    }
  }
  std::map<int, int64_t> first_z;  // by receiving rank, its lowest receiving plane
  for (const Slice& s : out) {
    auto [it, added] = first_z.try_emplace(s.to_rank, s.to[kAxisZ].lo);
    if (!added) it->second = std::min(it->second, s.to[kAxisZ].lo);
  }
  const auto key = [&](const Slice& s) { return s.to[kAxisZ].lo - first_z.at(s.to_rank); };
  std::stable_sort(out.begin(), out.end(),
                   [&](const Slice& a, const Slice& b) { return key(a) < key(b); });
  std::vector<uint64_t> used(plane_bytes.size(), 0);
  std::vector<std::set<int64_t>> held(plane_bytes.size());
  int64_t round = 0;
  for (Slice& s : out) {
    std::map<int, uint64_t> c = charges(s, held, plane_bytes);
    bool started = false, over = false;
    for (const auto& [r, bytes] : c) {
      started = started || used[static_cast<size_t>(r)] > 0;
      over = over || used[static_cast<size_t>(r)] + bytes > budget;
    }
    if (started && over) {
      ++round;
      std::fill(used.begin(), used.end(), 0);
      for (std::set<int64_t>& h : held) h.clear();
      c = charges(s, held, plane_bytes);
    }
    for (const auto& [r, bytes] : c) used[static_cast<size_t>(r)] += bytes;
    held[static_cast<size_t>(s.from_rank)].insert(s.from[kAxisZ].lo);
    held[static_cast<size_t>(s.to_rank)].insert(s.to[kAxisZ].lo);
    s.round = round;
  }
  return out;
}

// A buffer of size() bytes at data(), in memory kept for the next contents that fit in it
// (PartPlanes::message_memory's, else whole pages: aligned, so that a part's files read and
// write planes straight from it with O_DIRECT).
class KeptBuffer {
 public:
  void resize(size_t bytes, const PartPlanes& part) {
    size_ = bytes;
    if (bytes <= capacity_) return;
    memory_ = part.message_memory ? part.message_memory(bytes) : nullptr;
    if (!memory_) {
      void* pages = internal::allocate_pages(bytes);
      if (pages == nullptr) throw std::bad_alloc();
      memory_.reset(static_cast<std::byte*>(pages), internal::PageRelease{bytes, true});
    }
    capacity_ = bytes;
  }
  std::byte* data() const { return memory_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  std::shared_ptr<std::byte> memory_;
  size_t size_ = 0, capacity_ = 0;
};

// A rectangle of one plane of this rank's part (of consecutive planes: boxes_of) and where its
// packed values are.
struct RectAt {
  Block rect;
  std::byte* packed = nullptr;
};

// Runs of one transfer's plane rectangles packed one after the other, each as one box: a part
// in memory (PartPlanes::copy) copies a box at once (a device part: one copy command for all of
// an x or y face's planes, where a command costs tens of microseconds).
std::vector<RectAt> boxes_of(const std::vector<RectAt>& rects, const internal::PlaneFormat& f) {
  std::vector<RectAt> out;
  for (const RectAt& r : rects) {
    if (!out.empty()) {
      RectAt& box = out.back();
      const bool next =
          box.rect[kAxisX] == r.rect[kAxisX] && box.rect[kAxisY] == r.rect[kAxisY] &&
          box.rect[kAxisZ].hi == r.rect[kAxisZ].lo &&
          box.packed + f.rect_bytes(box.rect) * static_cast<size_t>(box.rect.size(kAxisZ)) ==
              r.packed;
      if (next) {
        box.rect[kAxisZ].hi = r.rect[kAxisZ].hi;
        continue;
      }
    }
    out.push_back(r);
  }
  return out;
}

// One message of a round: a run of the rectangles one rank sends another, packed one after
// the other from `at` (a message to itself is copied, not sent). A rank's messages to a peer in
// a round are posted in the order of their `index`, its receives from that peer too, so that
// MPI matches them pairwise (messages between two ranks with one tag do not overtake each
// other).
struct Chunk {
  int peer = 0;
  int64_t index = 0;  // among the round's messages between this rank and `peer`
  std::byte* at = nullptr;
  size_t bytes = 0;
  std::vector<RectAt> rects;
};

// Adds rectangle `r` (of `bytes`) to the message to or from `peer` open in `chunks`, or to a
// new one when it would take that past `limit` bytes (a rectangle is never split).
void add_to_chunk(std::vector<Chunk>* chunks, std::map<int, size_t>* open, int peer,
                  const RectAt& r, size_t bytes, size_t limit) {
  auto [it, first] = open->try_emplace(peer, chunks->size());
  Chunk* c = first ? nullptr : &(*chunks)[it->second];
  if (c == nullptr || c->bytes + bytes > limit) {
    const int64_t index = c == nullptr ? 0 : c->index + 1;
    it->second = chunks->size();
    c = &chunks->emplace_back(Chunk{peer, index, r.packed, 0, {}});
  }
  c->rects.push_back(r);
  c->bytes += bytes;
}

bool covers_plane(const Block& rect, const internal::PlaneFormat& f) {
  return rect.size(kAxisX) == f.nx && rect.size(kAxisY) == f.ny;
}

// The planes of this rank's part that one round touches, each held once in memory: read once
// (unless it only receives values everywhere, a z halo), its rectangles taken for sending and
// put after receiving, written once (if it received anything). A plane whose one rectangle is
// all of it (a z face) is held in that rectangle's packed place in a message buffer (the
// packed values of a whole plane are the plane), which saves copying it there or back. A part
// in memory (PartPlanes::copy) holds no plane: its rectangles are copied in place, in boxes.
class RoundPlanes {
 public:
  // `data` holds the other planes (kept by the caller from round to round).
  RoundPlanes(const PartPlanes& part, KeptBuffer* data, ExchangeStats* stats, Status* first)
      : part_(part), data_(*data), stats_(stats), first_(first) {}

  void add_send(const RectAt& r) {
    if (part_.copy) return;  // (no plane held)
    Held& h = add(r);
    h.sends = true;
  }
  void add_receive(const RectAt& r) {
    if (part_.copy) return;
    Held& h = add(r);
    h.receives = true;
    h.whole = h.whole || covers_plane(r.rect, part_.format);
  }

  // Reads the planes whose values are needed, in runs of consecutive planes.
  void read() {
    const size_t bytes = part_.format.bytes();
    size_t staged = 0;
    for (const auto& [z, h] : planes_) staged += in_message(h) ? 0 : 1;
    data_.resize(staged * bytes, part_);
    std::byte* next = data_.data();
    for (auto& [z, h] : planes_) {
      h.at = in_message(h) ? h.packed : std::exchange(next, next + bytes);
    }
    for_each_run([](const Held& h) { return h.sends || !h.whole; },
                 [&](int64_t z0, int64_t n, std::byte* at) {
                   record(part_.read(z0, n, at));
                   stats_->bytes_read += static_cast<uint64_t>(n) * part_.format.bytes();
                 });
  }
  // Starts the copy of `r` (a part in memory: maybe beside the caller), for finish().
  CopyWait copy(const RectAt& r, internal::RectCopy direction) {
    if (part_.copy) {
      Result<CopyWait> wait = part_.copy(r.rect, r.packed, direction);
      if (!wait.ok()) record(wait.status());
      return wait.ok() ? std::move(wait).value() : CopyWait();
    }
    const Held& h = planes_.at(r.rect[kAxisZ].lo);
    if (!in_message(h)) internal::copy_rect(h.at, part_.format, r.rect, r.packed, direction);
    return CopyWait();
  }
  // Returns once a copy started by copy() is done.
  void finish(const CopyWait& wait) {
    if (wait) record(wait());
  }
  // Writes the planes that received values, in runs of consecutive planes.
  void write() {
    for_each_run([](const Held& h) { return h.receives; },
                 [&](int64_t z0, int64_t n, std::byte* at) {
                   record(part_.write(z0, n, at));
                   stats_->bytes_written += static_cast<uint64_t>(n) * part_.format.bytes();
                 });
  }

 private:
  struct Held {
    bool sends = false, receives = false, whole = false;
    int rects = 0;                // rectangles of the round in this plane
    std::byte* packed = nullptr;  // where the values of a whole-plane rectangle are packed
    std::byte* at = nullptr;      // where the plane is held (read())
  };
  // Runs of at most this many bytes: a read or write that cannot go straight between the
  // files and the round's buffers (planes not of whole 4096-byte blocks) stages its planes in
  // a buffer of that size (store.h), which the round's budget does not count.
  static constexpr uint64_t kRunBytes = uint64_t{4} << 20;

  Held& add(const RectAt& r) {
    Held& h = planes_[r.rect[kAxisZ].lo];
    ++h.rects;
    if (covers_plane(r.rect, part_.format)) h.packed = r.packed;
    return h;
  }
  static bool in_message(const Held& h) { return h.rects == 1 && h.packed != nullptr; }
  void record(const Status& st) {
    if (first_->ok()) *first_ = st;
  }

  template <typename Pick, typename Io>
  void for_each_run(Pick pick, Io io) {
    const int64_t max_run = std::max<int64_t>(
        1, static_cast<int64_t>(kRunBytes / std::max<size_t>(part_.format.bytes(), 1)));
    for (auto it = planes_.begin(); it != planes_.end();) {
      if (!pick(it->second)) {
        ++it;
        continue;
      }
      const int64_t z0 = it->first;
      std::byte* start = it->second.at;
      const size_t bytes = part_.format.bytes();
      int64_t n = 0;
      while (it != planes_.end() && it->first == z0 + n && pick(it->second) && n < max_run &&
             it->second.at == start + static_cast<size_t>(n) * bytes) {
        ++n;
        ++it;
      }
      io(z0, n, start);
    }
  }

  const PartPlanes& part_;
  std::map<int64_t, Held> planes_;
  KeptBuffer& data_;
  ExchangeStats* stats_;
  Status* first_;
};

}  // namespace

PartPlanes planes_of(Grid& part) {
  PartPlanes p;
  p.format = internal::plane_format(part.manifest());
  p.read = [&part](int64_t z0, int64_t count, std::byte* out) {
    return part.read_planes(z0, count, out);
  };
  p.write = [&part](int64_t z0, int64_t count, const std::byte* in) {
    return part.write_planes(z0, count, in);
  };
  return p;
}

PartPlanes planes_of(ResidentGrid& held, const Grid& part) {
  PartPlanes p;
  p.format = internal::plane_format(part.manifest());
  p.copy = [&held](const Block& rect, std::byte* packed, internal::RectCopy direction) {
    return held.start_box_copy(rect, packed, direction);
  };
  p.message_memory = [&held](size_t bytes) { return held.transfer_memory(bytes); };
  return p;
}

// What stays from one exchange to the next: the slices and their rounds, which every exchange
// of a run repeats, and the buffers; and the exchange under way, from begin() to finish().
struct HaloExchange::State {
  PartPlanes part;
  size_t chunk_bytes = 0;  // the most a message holds (but for a rectangle larger)
  std::vector<Slice> all;
  std::vector<const Slice*> mine;        // this rank's, in round order
  std::vector<KeptBuffer> sends, recvs;  // by peer
  KeptBuffer planes;                     // the round's planes of the part

  ExchangeStats stats;
  Status local;                        // the first error of this rank's reads and writes
  std::optional<RoundPlanes> posted;   // the round posted and not yet completed
  std::vector<Chunk> incoming;         // its messages to put
  std::vector<MPI_Request> receiving;  // its receives, of incoming[arriving[i]]
  std::vector<size_t> arriving;
  // Sends posted and not yet known to be complete (the last round's, until the next round
  // reuses their buffers): finish() waits only for what this rank receives, so that it does not
  // wait for its neighbours to reach theirs.
  std::vector<MPI_Request> sending;

  int64_t rounds() const { return all.empty() ? 0 : all.back().round + 1; }
  void post(int64_t round);
  void send(std::vector<Chunk> outgoing);
  void complete();
  void wait_for_sends() {
    wait_all(&sending);
    sending.clear();
  }
  ~State() { wait_for_sends(); }  // (every peer has received them: see finish())
};

// Reads round `round`'s planes, posts its receives, and takes out and sends what it sends.
void HaloExchange::State::post(int64_t round) {
  const int me = rank(), n = size();
  const auto first =
      std::find_if(mine.begin(), mine.end(), [&](const Slice* s) { return s->round == round; });
  const auto last =
      std::find_if(first, mine.end(), [&](const Slice* s) { return s->round != round; });
  wait_for_sends();
  // The buffers first (they must not move later), allocated again only when they grow, which
  // they do not from one exchange to the next.
  std::vector<size_t> send_bytes(static_cast<size_t>(n), 0), recv_bytes(static_cast<size_t>(n), 0);
  for (auto it = first; it != last; ++it) {
    const Slice& s = **it;
    if (s.from_rank == me) send_bytes[static_cast<size_t>(s.to_rank)] += s.bytes;
    if (s.to_rank == me && s.from_rank != me)
      recv_bytes[static_cast<size_t>(s.from_rank)] += s.bytes;
  }
  for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
    sends[r].resize(send_bytes[r], part);
    recvs[r].resize(recv_bytes[r], part);
  }
  std::vector<Chunk> outgoing;
  incoming.clear();
  std::map<int, size_t> open_out, open_in;
  std::vector<size_t> send_at(static_cast<size_t>(n), 0), recv_at(static_cast<size_t>(n), 0);
  for (auto it = first; it != last; ++it) {
    const Slice& s = **it;
    if (s.from_rank == me) {
      size_t& at = send_at[static_cast<size_t>(s.to_rank)];
      const RectAt r{s.from, sends[static_cast<size_t>(s.to_rank)].data() + at};
      add_to_chunk(&outgoing, &open_out, s.to_rank, r, s.bytes, chunk_bytes);
      at += s.bytes;
    }
    if (s.to_rank == me) {  // what a rank sends itself is put from its send buffer
      auto& in = s.from_rank == me ? sends : recvs;
      size_t& at = recv_at[static_cast<size_t>(s.from_rank)];
      const RectAt r{s.to, in[static_cast<size_t>(s.from_rank)].data() + at};
      add_to_chunk(&incoming, &open_in, s.from_rank, r, s.bytes, chunk_bytes);
      at += s.bytes;
    }
  }
  // Each peer's first message first, then each's second...
  const auto by_index = [](const Chunk& a, const Chunk& b) { return a.index < b.index; };
  std::stable_sort(outgoing.begin(), outgoing.end(), by_index);
  std::stable_sort(incoming.begin(), incoming.end(), by_index);
  if (part.copy) {  // (a part in memory copies a message's runs of rectangles as boxes)
    for (std::vector<Chunk>* chunks : {&outgoing, &incoming}) {
      for (Chunk& c : *chunks) c.rects = boxes_of(c.rects, part.format);
    }
  }
  posted.emplace(part, &planes, &stats, &local);
  for (const Chunk& c : outgoing) {
    for (const RectAt& r : c.rects) posted->add_send(r);
  }
  for (const Chunk& c : incoming) {
    for (const RectAt& r : c.rects) posted->add_receive(r);
  }
  posted->read();
  receiving.clear();
  arriving.clear();
  for (size_t i = 0; i < incoming.size(); ++i) {
    const Chunk& c = incoming[i];
    if (c.peer == me) continue;
    receiving.emplace_back();
    arriving.push_back(i);
    MPI_Irecv(c.at, static_cast<int>(c.bytes), MPI_BYTE, c.peer, 0, MPI_COMM_WORLD,
              &receiving.back());
  }
  send(std::move(outgoing));
}

// Takes the values of `outgoing` out of the part and sends each message once its own are out:
// every copy is started first, so that where they run beside this thread (a device's, one
// after another on its transfer queue) a message travels while the next ones are copied out
// (MPI-ACC's pipeline; a part in its files has its planes read by now).
void HaloExchange::State::send(std::vector<Chunk> outgoing) {
  const int me = rank();
  std::vector<std::vector<CopyWait>> copied(outgoing.size());
  for (size_t i = 0; i < outgoing.size(); ++i) {
    for (const RectAt& r : outgoing[i].rects) {
      copied[i].push_back(posted->copy(r, internal::RectCopy::kToPacked));
    }
  }
  for (size_t i = 0; i < outgoing.size(); ++i) {
    for (const CopyWait& wait : copied[i]) posted->finish(wait);
    const Chunk& c = outgoing[i];
    if (c.peer == me) continue;
    sending.emplace_back();
    MPI_Isend(c.at, static_cast<int>(c.bytes), MPI_BYTE, c.peer, 0, MPI_COMM_WORLD,
              &sending.back());
    stats.bytes_sent += c.bytes;
  }
}

// Puts each message of the posted round as it arrives (its copies into a device's memory
// running while the next ones arrive), then writes the planes that received values.
void HaloExchange::State::complete() {
  std::vector<CopyWait> put;
  const auto start_put = [&](const Chunk& c) {
    for (const RectAt& r : c.rects) put.push_back(posted->copy(r, internal::RectCopy::kFromPacked));
  };
  for (const Chunk& c : incoming) {
    if (c.peer == rank()) start_put(c);  // (taken out by send())
  }
  for (int i = wait_any(&receiving); i != MPI_UNDEFINED; i = wait_any(&receiving)) {
    start_put(incoming[arriving[static_cast<size_t>(i)]]);
  }
  for (const CopyWait& wait : put) posted->finish(wait);
  posted->write();
  posted.reset();
}

HaloExchange::HaloExchange(std::unique_ptr<State> state) : state_(std::move(state)) {}
HaloExchange::HaloExchange(HaloExchange&&) noexcept = default;
HaloExchange& HaloExchange::operator=(HaloExchange&&) noexcept = default;
HaloExchange::~HaloExchange() = default;

Result<HaloExchange> HaloExchange::create(PartPlanes part,
                                          const std::vector<BoxTransfer>& transfers,
                                          uint64_t buffer_bytes, uint64_t chunk_bytes) {
  const int me = rank(), n = size();
  const internal::PlaneFormat& format = part.format;
  // A slice (at most a plane) must fit one message, whose size MPI counts in an int.
  const bool plane_fits = format.bytes() <= INT_MAX;
  DG_RETURN_IF_ERROR(agree(plane_fits
                               ? Status::Ok()
                               : unsupported("planes over 2 GiB cannot be exchanged yet; use a "
                                             "smaller x-y extent or split x or y (--procs)")));
  // Every rank must cut the same rounds: the smallest budget any rank allows, and at most what
  // one MPI message of bytes can count.
  uint64_t budget = std::min<uint64_t>(buffer_bytes, INT_MAX);
  MPI_Allreduce(MPI_IN_PLACE, &budget, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  std::vector<uint64_t> plane_bytes(static_cast<size_t>(n));
  plane_bytes[static_cast<size_t>(me)] = part.copy ? 0 : format.bytes();  // planes held
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, plane_bytes.data(), 1, MPI_UINT64_T,
                MPI_COMM_WORLD);
  auto state = std::make_unique<State>();
  state->chunk_bytes = part.copy ? std::max<uint64_t>(chunk_bytes, 1) : UINT64_MAX;
  state->part = std::move(part);
  state->all = slices_in_rounds(transfers, plane_bytes, format, budget);
  for (const Slice& s : state->all) {
    if (s.from_rank == me || s.to_rank == me) state->mine.push_back(&s);
  }
  state->sends.resize(static_cast<size_t>(n));
  state->recvs.resize(static_cast<size_t>(n));
  return HaloExchange(std::move(state));
}

void HaloExchange::begin() {
  const auto t0 = std::chrono::steady_clock::now();
  State& st = *state_;
  st.stats = {};
  st.local = Status::Ok();
  for (int64_t round = 0; round < st.rounds(); ++round) {
    if (st.posted) st.complete();
    st.post(round);
  }
  st.stats.seconds = seconds_since(t0);
}

Result<ExchangeStats> HaloExchange::finish() {
  const auto t0 = std::chrono::steady_clock::now();
  State& st = *state_;
  if (st.posted) st.complete();
  DG_RETURN_IF_ERROR(agree(st.local));
  st.stats.seconds += seconds_since(t0);
  return st.stats;
}

Result<ExchangeStats> HaloExchange::run() {
  begin();
  return finish();
}

Result<ExchangeStats> exchange_halos(const PartPlanes& part,
                                     const std::vector<BoxTransfer>& transfers,
                                     uint64_t buffer_bytes) {
  DG_ASSIGN_OR_RETURN(HaloExchange exchange, HaloExchange::create(part, transfers, buffer_bytes));
  return exchange.run();
}

}  // namespace deepgrid::mpi
