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

// Where this rank's part's planes are: its files (whole planes read and written), or the
// memory of a resident engine (rectangles copied in place).
struct PartPlanes {
  internal::PlaneFormat format;
  std::function<Status(int64_t z0, int64_t count, std::byte* out)> read;
  std::function<Status(int64_t z0, int64_t count, const std::byte* in)> write;
  // Set for a part in memory, instead of read and write: the rectangles go straight between
  // the part and the messages.
  std::function<Status(const Block& rect, std::byte* packed, internal::RectCopy direction)> copy;
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
// takes the rectangles it sends, posts every receive and send with each peer
// (MPI_Irecv/MPI_Isend, one message per peer, the rectangles in list order), waits for its
// receives, puts the rectangles it received and writes the planes that received any: each
// plane is read and written at most once per round. Its sends are waited for before their
// buffers take the next round's (or the next exchange's) values, by when every peer has them.
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
                                     uint64_t buffer_bytes);
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
