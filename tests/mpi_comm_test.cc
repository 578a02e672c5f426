// The MPI job's communication (comm.h, halo_exchange.h): ranks waiting for a slower one, in
// agree(), for halos or for planes, sleep and leave their machine's CPUs to the others; parts
// held in memory or on devices exchange their halos in pipelined messages. Part of mpi_test
// (see mpi_test.cc): every rank runs every test, in the same order.
#include <gtest/gtest.h>
#include <time.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "device/device.h"
#include "mpi/comm.h"
#include "mpi/halo_exchange.h"
#include "mpi_test_helpers.h"
#include "plan/plan.h"
#include "run/resident_grid.h"

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
  part.copy = [&](const Block&, std::byte* packed,
                  internal::RectCopy direction) -> Result<mpi::CopyWait> {
    if (direction == internal::RectCopy::kToPacked) {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      std::memcpy(packed, values.data(), sizeof(float) * values.size());
    } else {
      std::memcpy(values.data(), packed, sizeof(float) * values.size());
    }
    return mpi::CopyWait();  // (done)
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

// Whether `path` appears within a minute.
bool appears(const std::string& path) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(60)) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A part in memory sends its halos in messages of at most the chunk's bytes, each once its own
// rectangles are out of the part, and puts each message as it arrives (MPI-ACC's pipeline):
// here rank 0 sends rank 1 an 8-plane box in messages of two planes, and its copy of the last
// message out of the part (which runs beside the exchange, as a device's does) finishes only
// once rank 1 has put the first. Taking every copy out before sending any, or putting nothing
// before everything arrived, would leave it waiting in vain. The values arrive whole.
TEST(Communication, PartsInMemorySendEachMessageWhileTheNextIsCopiedOut) {
  if (mpi::size() == 1) GTEST_SKIP() << "one rank sends nothing";
  SharedTempDir tmp;
  const std::string first_put = tmp / "first-message-put";
  constexpr int64_t kPlanes = 8, kPlane = 12;
  const Block box{{Span{0, 4}, Span{0, 3}, Span{0, kPlanes}}};
  std::vector<float> values(kPlane * kPlanes, 0.0F);
  if (mpi::rank() == 0) std::iota(values.begin(), values.end(), 1.0F);
  bool first_put_seen = false;
  mpi::PartPlanes part;
  part.format = internal::PlaneFormat{4, 3, 1, sizeof(float)};
  part.copy = [&](const Block& b, std::byte* packed,
                  internal::RectCopy direction) -> Result<mpi::CopyWait> {
    float* planes = values.data() + b[kAxisZ].lo * kPlane;
    const size_t bytes = sizeof(float) * kPlane * static_cast<size_t>(b.size(kAxisZ));
    if (direction == internal::RectCopy::kFromPacked) {
      std::memcpy(planes, packed, bytes);
      if (b[kAxisZ].lo == 0) std::ofstream(first_put) << "put\n";
      return mpi::CopyWait();
    }
    const bool last = b[kAxisZ].hi == kPlanes;
    return mpi::CopyWait([=, &first_put_seen] {
      if (last) first_put_seen = appears(first_put);
      std::memcpy(packed, planes, bytes);
      return Status::Ok();
    });
  };
  const std::vector<BoxTransfer> transfers{{0, box, 1, box}};
  const uint64_t two_planes = 2 * kPlane * sizeof(float);
  auto exchange = mpi::HaloExchange::create(part, transfers, 1 << 20, two_planes);
  ASSERT_TRUE(exchange.ok()) << exchange.status().message();
  const auto done = exchange->run();
  ASSERT_TRUE(done.ok()) << done.status().message();
  if (mpi::rank() == 0) {
    EXPECT_TRUE(first_put_seen) << "rank 1 put no message before rank 0's last was out";
    EXPECT_EQ(done->bytes_sent, kPlanes * kPlane * sizeof(float));
  }
  if (mpi::rank() == 1) {
    for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(values[i], static_cast<float>(i + 1));
  }
}

// Parts held by the in-core engine and on devices (device-resident) exchange boxes bitwise in
// messages of any size: each rank sends the next (in a ring; one rank, itself) a box of its
// part into another place of that one's, in messages of one rectangle, of a few, and of all,
// and every other value stays as it was.
TEST(Communication, PartsHeldInMemoryExchangeBoxesInMessagesOfAnySize) {
  struct Placement {
    Method method;
    std::string device;
  };
  std::vector<Placement> placements{{Method::kInCore, ""}};
  const auto devices = device::list_devices();
  if (devices.ok() && !devices->empty()) {
    placements.push_back(
        {Method::kDevice, std::to_string(mpi::rank() % static_cast<int>(devices->size()))});
  }
  SharedTempDir tmp;
  const Shape s{9, 7, 10};
  const Block from{{Span{1, 4}, Span{2, 6}, Span{0, 10}}},
      to{{Span{5, 8}, Span{0, 4}, Span{0, 10}}};
  const int me = mpi::rank(), n = mpi::size(), sender = (me + n - 1) % n;
  const auto rect_bytes = static_cast<uint64_t>(from.size(kAxisX) * from.size(kAxisY)) * 4;
  const std::vector<float> mine = testing::random_values<float>(s, 1 + me);
  const std::vector<float> sent = testing::random_values<float>(s, 1 + sender);
  int grids = 0;
  for (const Placement& p : placements) {
    for (const uint64_t chunk : {uint64_t{1}, 3 * rect_bytes, mpi::kHaloChunkBytes}) {
      SCOPED_TRACE(::testing::Message()
                   << "method " << method_name(p.method) << ", messages of " << chunk << " bytes");
      CreateOptions c;
      c.shape = s;
      c.init = InitSpec{InitSpec::Kind::kRandom, 0, static_cast<uint64_t>(1 + me)};
      auto grid =
          Grid::create(tmp / ("part" + std::to_string(grids++) + "_" + std::to_string(me)), c);
      ASSERT_TRUE(grid.ok()) << grid.status().message();
      RunOptions opt;
      opt.scheme = Stencil::preset("7pt").value();
      opt.steps = 1;
      opt.threads = 1;
      opt.method = p.method;
      opt.device = p.device;
      auto plan = prepare_run(*grid, opt);
      ASSERT_TRUE(plan.ok()) << plan.status().message();
      auto held = ResidentGrid::load(*grid, opt, *plan);
      ASSERT_TRUE(held.ok()) << held.status().message();
      std::vector<BoxTransfer> transfers;
      for (int r = 0; r < n; ++r) transfers.push_back({r, from, (r + 1) % n, to});
      auto exchange =
          mpi::HaloExchange::create(mpi::planes_of(*held, *grid), transfers, 1 << 20, chunk);
      ASSERT_TRUE(exchange.ok()) << exchange.status().message();
      const auto done = exchange->run();
      ASSERT_TRUE(done.ok()) << done.status().message();
      std::vector<float> got(mine.size());
      const Block whole{{Span{0, s.nx}, Span{0, s.ny}, Span{0, s.nz}}};
      ASSERT_TRUE(held->read_box(whole, reinterpret_cast<std::byte*>(got.data())).ok());
      std::vector<float> expected = mine;
      for (int64_t z = 0; z < s.nz; ++z) {
        for (int64_t y = 0; y < to.size(kAxisY); ++y) {
          for (int64_t x = 0; x < to.size(kAxisX); ++x) {
            const auto at = [&](const Block& b) {
              return static_cast<size_t>((z * s.ny + b[kAxisY].lo + y) * s.nx + b[kAxisX].lo + x);
            };
            expected[at(to)] = sent[at(from)];
          }
        }
      }
      EXPECT_EQ(testing::first_bitwise_difference(got, expected), -1);
    }
  }
}

}  // namespace
}  // namespace deepgrid
