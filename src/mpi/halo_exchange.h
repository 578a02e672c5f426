// The halo exchange of a distributed run: every rank's halos (faces, edges, corners) get the
// current values of the points they stand for, read from the owners' parts and sent by
// non-blocking MPI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "deepgrid/store.h"
#include "run/resident_grid.h"
#include "store/distributed_manifest.h"
#include "store/plane_rect.h"

namespace deepgrid::mpi {

using CopyWait = ResidentGrid::CopyWait;

// The most bytes a part in memory puts in one message (HaloExchange::create). A larger
// message waits longer for its copy off the device before it travels; a smaller one pays its
// copy command more often. MPI-ACC found 256 KiB best over PCIe 2 (6 GB/s: 43 us a chunk);
// over PCIe 4-5 (25-50 GB/s) 1 MiB takes 21-42 us, about what a copy command from pinned
// memory costs (a few tens of microseconds on an H200, docs/performance/devices.md; not timed
// per command). An estimate until a GPU node times the exchange.
inline constexpr uint64_t kHaloChunkBytes = uint64_t{1} << 20;

// Where this rank's part's planes are: its files (whole planes read and written), or the
// memory of a resident engine (rectangles copied in place).
struct PartPlanes {
  internal::PlaneFormat format;
  std::function<Status(int64_t z0, int64_t count, std::byte* out)> read;
  std::function<Status(int64_t z0, int64_t count, const std::byte* in)> write;
  // Set for a part in memory, instead of read and write: the rectangles go straight between
  // the part and the messages. Starts the copy of the x-y rectangle of `rect` in each of its
  // planes and returns what waits for it (ResidentGrid::start_box_copy: a device part's copies
  // run beside the exchange).
  std::function<Result<CopyWait>(const Block& rect, std::byte* packed,
                                 internal::RectCopy direction)>
      copy;
  // Where the messages' buffers come from (a part on a device: its pinned host memory); empty,
  // or null returned: the heap.
  std::function<std::shared_ptr<std::byte>(size_t bytes)> message_memory;
};
PartPlanes planes_of(Grid& part);
PartPlanes planes_of(ResidentGrid& held, const Grid& part);  // `part` held in memory

struct ExchangeStats {
  double seconds = 0;  // the whole exchange: reads, transfers, writes
  uint64_t bytes_read = 0, bytes_written = 0, bytes_sent = 0;
};

// Runs this rank's share of `transfers` (halo_transfers of every part) on its part. Each
// transfer moves one x-y rectangle per plane of its box; those rectangles are grouped into
// rounds in which no rank holds more than `buffer_bytes` (the smallest any rank gives; every
// rank computes the same rounds from the same list): its send and receive buffers and one copy
// of each plane of its part the round touches. A round reads those planes (runs of consecutive
// planes in one request; a plane that only receives values everywhere, a z halo, is not read),
// posts its receives, takes out the rectangles it sends and sends them (MPI_Irecv/MPI_Isend;
// the rectangles in list order, in one message per peer, or for a part in memory in messages
// of at most `chunk_bytes`, each sent once its own rectangles are out while the next are
// copied: MPI-ACC's pipeline), puts each message's rectangles as it arrives and writes the
// planes that received any: each plane is read and written at most once per round. Its sends
// are waited for before their buffers take the next round's (or the next exchange's) values,
// by when every peer has them.
// Rectangles a rank sends to itself are copied. Collective. A rank whose reads or writes fail still
// takes part in every round (sending what it has), so that nobody waits forever; the error is
// agreed at the end.
//
// A HaloExchange does the same exchange again and again (the rounds of a run whose parts stay
// in memory): its slices and rounds are cut once, and its buffers kept from one exchange to
// the next (at most `buffer_bytes` of them).
//
// An exchange runs in two halves, so that work that needs no halo can go on while the last
// round's messages travel: begin() runs every round but the last, and of the last reads and
// sends what this rank sends and posts its receives; finish() waits for them and puts what
// arrived. Between the two the caller may compute from the part's planes (but for its halos)
// and must not change them: finish() writes back the planes begin() read, halos put in.
// run() is begin() then finish().
class HaloExchange {
 public:
  // Collective (every rank agrees on the rounds).
  static Result<HaloExchange> create(PartPlanes part, const std::vector<BoxTransfer>& transfers,
                                     uint64_t buffer_bytes, uint64_t chunk_bytes = kHaloChunkBytes);
  void begin();                    // collective, with finish()
  Result<ExchangeStats> finish();  // the time in begin() and finish(); collective
  Result<ExchangeStats> run();     // collective

  HaloExchange(HaloExchange&&) noexcept;
  HaloExchange& operator=(HaloExchange&&) noexcept;
  ~HaloExchange();

  struct State;

 private:
  explicit HaloExchange(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// One exchange: HaloExchange::create(...).run().
Result<ExchangeStats> exchange_halos(const PartPlanes& part,
                                     const std::vector<BoxTransfer>& transfers,
                                     uint64_t buffer_bytes);

}  // namespace deepgrid::mpi
