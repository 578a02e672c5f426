#include "mpi/comm.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <utility>

namespace deepgrid::mpi {
namespace {

double g_agree_wait = 0;

int to_int(size_t n) { return static_cast<int>(n); }

// MPI_Allreduce of one int, waited for by wait_all().
int all_reduce(int value, MPI_Op op) {
  std::vector<MPI_Request> request(1);
  MPI_Iallreduce(MPI_IN_PLACE, &value, 1, MPI_INT, op, MPI_COMM_WORLD, request.data());
  wait_all(&request);
  return value;
}

// Open MPI's blocking waits poll at full speed, so a rank that arrives early would take a CPU
// from the ranks still working (several ranks may share a node's cores). Most waits end within
// a millisecond (a fast collective, a halo already on its way): those poll at full speed, as
// MPI_Waitall would, because a sleep adds latency (one of 10 us takes about 80; sleeping from
// the start took a 64 KiB exchange between two ranks from 10 us to 175, measured on the
// development VM). Longer waits are for a rank still working: they sleep between polls, the
// pause growing to 1 ms, so a transfer that is still moving after a millisecond (Open MPI
// progresses it only inside the polls) may end up to a pause later.
template <typename Done>
void wait_until(Done&& done) {
  using std::chrono::microseconds;
  const auto t0 = std::chrono::steady_clock::now();
  auto pause = microseconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() - t0 < microseconds(1000)) continue;
    std::this_thread::sleep_for(pause);
    pause = std::min(2 * pause, microseconds(1000));
  }
}

}  // namespace

void wait_all(std::vector<MPI_Request>* requests) {
  wait_until([requests] {
    int done = 0;
    MPI_Testall(to_int(requests->size()), requests->data(), &done, MPI_STATUSES_IGNORE);
    return done != 0;
  });
}

int wait_any(std::vector<MPI_Request>* requests) {
  int index = MPI_UNDEFINED;
  wait_until([&] {
    int done = 0;
    MPI_Testany(to_int(requests->size()), requests->data(), &index, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
  return index;
}

namespace {

// The ranks on this rank's machine, as a communicator the caller frees.
MPI_Comm this_machine() {
  MPI_Comm machine = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &machine);
  return machine;
}

// What `ask` (MPI_Comm_size or MPI_Comm_rank) says of this machine's communicator.
int of_this_machine(int (*ask)(MPI_Comm, int*)) {
  MPI_Comm machine = this_machine();
  int value = 0;
  ask(machine, &value);
  MPI_Comm_free(&machine);
  return value;
}

}  // namespace

int ranks_on_this_machine() { return of_this_machine(MPI_Comm_size); }
int rank_on_this_machine() { return of_this_machine(MPI_Comm_rank); }

int cpu_share() {
  MPI_Comm machine = this_machine();
  int ranks = 1;
  MPI_Comm_size(machine, &ranks);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (::sched_getaffinity(0, sizeof mine, &mine) != 0) {
    const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned c = 0; c < cpus && c < CPU_SETSIZE; ++c) CPU_SET(c, &mine);
  }
  std::vector<cpu_set_t> all(static_cast<size_t>(ranks));
  MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, machine);
  MPI_Comm_free(&machine);
  double share = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &mine)) continue;
    const auto users = std::count_if(all.begin(), all.end(),
                                     [c](const cpu_set_t& s) { return CPU_ISSET(c, &s) != 0; });
    share += 1.0 / static_cast<double>(users);
  }
  return std::max(1, static_cast<int>(share + 1e-9));
}

void send(const void* data, size_t bytes, int to, int tag) {
  std::vector<MPI_Request> request(1);
  MPI_Isend(data, to_int(bytes), MPI_BYTE, to, tag, MPI_COMM_WORLD, request.data());
  wait_all(&request);
}

void receive(int from, int tag, std::vector<std::byte>* message) {
  MPI_Message matched = MPI_MESSAGE_NULL;
  MPI_Status status;
  wait_until([&] {
    int found = 0;
    MPI_Improbe(from, tag, MPI_COMM_WORLD, &found, &matched, &status);
    return found != 0;
  });
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  message->resize(static_cast<size_t>(bytes));
  MPI_Mrecv(message->data(), bytes, MPI_BYTE, &matched, MPI_STATUS_IGNORE);
}

bool launched_by_mpirun() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

Session::Session(int* argc, char*** argv) {
  int provided = 0;
  // MPI calls come from the main thread only (the engines' OpenMP threads make none). MPI's
  // own errors stay fatal (its default): they end the whole job rather than one rank.
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
}

Session::~Session() { MPI_Finalize(); }

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

Status agree(const Status& mine) {
  const auto t0 = std::chrono::steady_clock::now();
  const int me = rank();
  const int first_failed = all_reduce(mine.ok() ? size() : me, MPI_MIN);
  g_agree_wait += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (first_failed == size()) return Status::Ok();
  int code = static_cast<int>(mine.code());
  MPI_Bcast(&code, 1, MPI_INT, first_failed, MPI_COMM_WORLD);
  const std::string message = broadcast(mine.message(), first_failed);
  // A message that names its rank already (rank 0 relaying another's) is kept as it is.
  const bool named = message.rfind("rank ", 0) == 0;
  return Status(
      static_cast<ErrorCode>(code),
      size() > 1 && !named ? "rank " + std::to_string(first_failed) + ": " + message : message);
}

double agree_wait_seconds() { return g_agree_wait; }

bool any_rank(bool mine) { return all_reduce(mine ? 1 : 0, MPI_MAX) != 0; }

void barrier() {
  std::vector<MPI_Request> request(1);
  MPI_Ibarrier(MPI_COMM_WORLD, request.data());
  wait_all(&request);
}

std::string broadcast(const std::string& text, int root) {
  int64_t n = static_cast<int64_t>(text.size());
  MPI_Bcast(&n, 1, MPI_INT64_T, root, MPI_COMM_WORLD);
  std::string out = rank() == root ? text : std::string(static_cast<size_t>(n), '\0');
  MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, root, MPI_COMM_WORLD);
  return out;
}

namespace {

// Where each rank's text lies in the texts of all ranks, one after another.
struct Pieces {
  std::vector<int> counts, offsets;
  int total = 0;

  explicit Pieces(std::vector<int> sizes) : counts(std::move(sizes)) {
    for (int c : counts) {
      offsets.push_back(total);
      total += c;
    }
  }
  std::vector<std::string> split(const std::string& all) const {
    std::vector<std::string> out;
    for (size_t r = 0; r < counts.size(); ++r) {
      out.push_back(all.substr(static_cast<size_t>(offsets[r]), static_cast<size_t>(counts[r])));
    }
    return out;
  }
};

}  // namespace

std::vector<std::string> all_gather(const std::string& text) {
  int mine = to_int(text.size());
  std::vector<int> sizes(static_cast<size_t>(size()));
  MPI_Allgather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD);
  const Pieces at(std::move(sizes));
  std::string all(static_cast<size_t>(at.total), '\0');
  MPI_Allgatherv(text.data(), mine, MPI_CHAR, all.data(), at.counts.data(), at.offsets.data(),
                 MPI_CHAR, MPI_COMM_WORLD);
  return at.split(all);
}

std::vector<std::string> gather(const std::string& text, int root) {
  int mine = to_int(text.size());
  const bool here = rank() == root;
  std::vector<int> sizes(here ? static_cast<size_t>(size()) : 0);
  MPI_Gather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, MPI_COMM_WORLD);
  const Pieces at(std::move(sizes));
  std::string all(static_cast<size_t>(at.total), '\0');
  MPI_Gatherv(text.data(), mine, MPI_CHAR, all.data(), at.counts.data(), at.offsets.data(),
              MPI_CHAR, root, MPI_COMM_WORLD);
  return at.split(all);
}

}  // namespace deepgrid::mpi
