// The MPI job's communication (comm.h, halo_exchange.h): ranks waiting for a slower one, in
// agree(), for halos or for planes, sleep and leave their machine's CPUs to the others. Part of
// mpi_test (see mpi_test.cc): every rank runs every test, in the same order.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

#include "mpi/comm.h"
#include "mpi/halo_exchange.h"
#include "mpi_test_helpers.h"

namespace deepgrid {
namespace {

using namespace mpi_testing;

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Whether this rank, which waited `waited` seconds for a slower one while it took `cpu` seconds
// of CPU time, left the CPU to others (spinning, it takes all of the wait).
void expect_slept(double waited, double cpu) {
  EXPECT_GT(waited, 0.3);
  EXPECT_LT(cpu, 0.25 * waited) << "rank " << mpi::rank() << " took " << cpu
                                << " s of CPU time while it waited " << waited << " s";
}

// Ranks waiting for a slower one in agree() sleep: a blocking MPI collective polls at full
// speed, and would take its node's CPUs from the rank still working (rank 0 measuring the
// machine, or a rank finishing a longer phase). Rank 0 here works 0.4 s before agreeing.
TEST(Communication, RanksWaitingInAgreeLeaveTheCpusToTheOthers) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank waits for nobody";
  mpi::barrier();
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  if (mpi::rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(mpi::agree(Status::Ok()).ok());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = thread_cpu_seconds() - cpu0;
  if (mpi::rank() != 0) expect_slept(waited, cpu);
}

// So do ranks waiting for their halos: here every rank receives a 4x3 plane from rank 0, which
// takes 0.4 s to take its values out of its part. The values arrive all the same.
TEST(Communication, RanksWaitingForHalosLeaveTheCpusToTheOthers) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank waits for nobody";
  const Block plane{{Span{0, 4}, Span{0, 3}, Span{0, 1}}};
  std::vector<float> values(12, 0.0F);
  if (mpi::rank() == 0) std::iota(values.begin(), values.end(), 1.0F);
  mpi::PartPlanes part;
  part.format = internal::PlaneFormat{4, 3, 1, sizeof(float)};
  part.copy = [&](const Block&, std::byte* packed, internal::RectCopy direction) {
    if (direction == internal::RectCopy::kToPacked) {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      std::memcpy(packed, values.data(), sizeof(float) * values.size());
    } else {
      std::memcpy(values.data(), packed, sizeof(float) * values.size());
    }
    return Status::Ok();
  };
  std::vector<BoxTransfer> transfers;
  for (int r = 1; r < mpi::size(); ++r) transfers.push_back({0, plane, r, plane});
  auto exchange = mpi::HaloExchange::create(part, transfers, 1 << 20);
  ASSERT_TRUE(exchange.ok()) << exchange.status().message();
  mpi::barrier();
  const double cpu0 = thread_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(exchange->run().ok());
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = thread_cpu_seconds() - cpu0;
  if (mpi::rank() == 0) return;
  expect_slept(waited, cpu);
  EXPECT_EQ(values[0], 1.0F);
  EXPECT_EQ(values[11], 12.0F);
}

// And ranks waiting for each other's planes (checkpoint, export and plot gather planes on rank
// 0): here first every rank sends rank 0 a 4 MiB message, too large for MPI to buffer, which
// rank 0 takes only after 0.4 s; then every rank sends another 0.4 s late, which rank 0 waits
// for. The messages arrive whole.
TEST(Communication, RanksWaitingForPlanesLeaveTheCpusToTheOthers) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank waits for nobody";
  constexpr int kTag = 11;
  std::vector<std::byte> mine(4 << 20, std::byte{static_cast<unsigned char>(mpi::rank())});
  auto timed = [](auto&& work) {
    mpi::barrier();
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    work();
    return std::pair{std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                     thread_cpu_seconds() - cpu0};
  };
  auto receive_all = [&] {
    std::vector<std::byte> got;
    for (int r = 1; r < mpi::size(); ++r) {
      mpi::receive(r, kTag, &got);
      ASSERT_EQ(got.size(), mine.size());
      EXPECT_EQ(got.front(), std::byte{static_cast<unsigned char>(r)});
      EXPECT_EQ(got.back(), std::byte{static_cast<unsigned char>(r)});
    }
  };
  const auto late = std::chrono::milliseconds(400);
  const auto [sent_after, send_cpu] = timed([&] {
    if (mpi::rank() != 0) return mpi::send(mine.data(), mine.size(), 0, kTag);
    std::this_thread::sleep_for(late);
    receive_all();
  });
  if (mpi::rank() != 0) expect_slept(sent_after, send_cpu);
  const auto [received_after, receive_cpu] = timed([&] {
    if (mpi::rank() == 0) return receive_all();
    std::this_thread::sleep_for(late);
    mpi::send(mine.data(), mine.size(), 0, kTag);
  });
  if (mpi::rank() == 0) expect_slept(received_after, receive_cpu);
}

}  // namespace
}  // namespace deepgrid
