// The halo exchange of a distributed run: every rank's halos (faces, edges, corners) get the
// current values of the points they stand for, read from the owners' parts and sent by
// non-blocking MPI.
#pragma once

#include <cstdint>
#include <vector>

#include "deepgrid/distributed.h"
#include "deepgrid/store.h"

namespace deepgrid::mpi {

struct ExchangeStats {
  double seconds = 0;  // the whole exchange: reads, transfers, writes
  uint64_t bytes_read = 0, bytes_written = 0, bytes_sent = 0;
};

// Runs this rank's share of `transfers` (halo_transfers of every part) on its open part. Each
// transfer moves one x-y rectangle per plane of its box; those rectangles are grouped into
// rounds in which no rank's send and receive buffers exceed `buffer_bytes` (the smallest any
// rank gives; every rank computes the same rounds from the same list). A round posts every
// receive and send with each peer (MPI_Irecv/MPI_Isend, one message per peer, the rectangles in
// list order) and waits for all of them; rectangles a rank sends to itself are copied. Each
// plane of the part a round touches is read once (to take the rectangles it sends) and read and
// written once (to put the ones it receives): with x or y neighbours that is every plane of the
// part. Collective. A rank whose reads or writes fail still takes part in every round (sending
// what it has), so that nobody waits forever; the error is agreed at the end.
Result<ExchangeStats> exchange_halos(Grid& part, const std::vector<BoxTransfer>& transfers,
                                     uint64_t buffer_bytes);

}  // namespace deepgrid::mpi
