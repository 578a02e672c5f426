// The MPI job a distributed command runs in: set-up and tear-down, and the few collective
// operations the distributed grid needs, over MPI_COMM_WORLD.
//
// Failure contract: a rank never leaves a collective phase alone. Every phase ends with
// agree(status): each rank passes its own outcome and all of them get the same one back, the
// error of the lowest failing rank (its message prefixed with "rank R: "), so that every rank
// stops together with one clear message instead of waiting for a partner that has given up.
//
// A rank waiting in agree(), any_rank() or barrier(), or for messages (wait_all(), send(),
// receive()), sleeps between polls once it has waited a millisecond, so that it leaves its
// node's CPUs to the ranks still working.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "deepgrid/status.h"

namespace deepgrid::mpi {

// Whether this process was started by mpirun/mpiexec (OpenMPI, or a PMI/PMIx launcher).
bool launched_by_mpirun();

// MPI_Init_thread on construction, MPI_Finalize on destruction.
class Session {
 public:
  Session(int* argc, char*** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

int rank();
int size();

// Every rank's status in, the same status out on every rank (see above). Collective.
Status agree(const Status& mine);
// Seconds this rank waited in agree() since the process started: how long it sat idle while
// slower ranks finished their phase.
double agree_wait_seconds();

// Whether `mine` is true on any rank. Collective.
bool any_rank(bool mine);
// Returns when every rank has called it. Collective.
void barrier();
// MPI_Waitall of `requests`, polling at full speed for a millisecond, then sleeping between
// polls (pauses growing to 1 ms).
void wait_all(std::vector<MPI_Request>* requests);
// MPI_Waitany of `requests`, waiting as wait_all() does: the index of a request done (now
// MPI_REQUEST_NULL), or MPI_UNDEFINED once none is left.
int wait_any(std::vector<MPI_Request>* requests);
// Blocking messages of bytes that wait as wait_all() does: send() returns once MPI is done with
// `data` (for a large message: once `to` has it); receive() takes the next message from `from`
// with `tag` into `message`, resized to fit.
void send(const void* data, size_t bytes, int to, int tag);
void receive(int from, int tag, std::vector<std::byte>* message);

// This rank's share of its machine's CPUs: each CPU it may run on (its affinity mask) counts
// 1/n, where n ranks on the machine may run on that CPU; at least 1. Collective.
int cpu_share();
// The ranks of the job on this rank's machine (this one included), and this rank's place
// among them (0 ... ranks_on_this_machine() - 1). Collective.
int ranks_on_this_machine();
int rank_on_this_machine();

// Root's text on every rank. Collective.
std::string broadcast(const std::string& text, int root = 0);
// Every rank's text, in rank order, on every rank. Collective.
std::vector<std::string> all_gather(const std::string& text);
// Every rank's text, in rank order, on `root` (empty elsewhere). Collective.
std::vector<std::string> gather(const std::string& text, int root = 0);

}  // namespace deepgrid::mpi
