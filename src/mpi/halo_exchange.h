// The halo exchange of a distributed run: every rank's halo planes get the current values of
// the planes they stand for, read from the owners' parts and sent by non-blocking MPI.
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

// Runs this rank's share of `transfers` (halo_transfers of every part) on its open part:
// rounds of at most `buffer_bytes` of plane buffers, each round posting every receive and send
// with each peer (MPI_Irecv/MPI_Isend, one message per peer) and waiting for all of them;
// planes a rank sends to itself are copied. Collective. A rank whose reads or writes fail
// still takes part in every round (sending zeros), so that nobody waits forever; the error is
// agreed at the end.
Result<ExchangeStats> exchange_halos(Grid& part, const std::vector<PlaneTransfer>& transfers,
                                     uint64_t buffer_bytes);

}  // namespace deepgrid::mpi
