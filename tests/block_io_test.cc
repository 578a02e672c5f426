// Asynchronous block I/O: one suite run against both backends. Concurrent writes and reads
// verified byte for byte, the submit() contract (alignment, queue depth), injected failures
// and short transfers, end of file, and destruction with requests in flight.
#include "io/block_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"

namespace deepgrid::io {
namespace {

using internal::AlignedBuffer;

constexpr size_t kBlock = 64 << 10;  // bytes per request in the bulk tests
constexpr unsigned kBlocks = 64;
constexpr unsigned kDepth = 8;

BlockIoOptions options(Backend backend, unsigned queue_depth = kDepth, FaultHook hook = {}) {
  BlockIoOptions o;
  o.backend = backend;
  o.queue_depth = queue_depth;
  o.threads = 3;
  o.fault_hook = std::move(hook);
  return o;
}

// The byte stored at file position `pos` by the bulk writes.
std::byte pattern(size_t pos) { return static_cast<std::byte>((pos * 2654435761u) >> 13); }

void fill_pattern(const AlignedBuffer& buf) {
  for (size_t i = 0; i < buf.size(); ++i) buf.data()[i] = pattern(i);
}

// Index of the first byte that differs from the pattern, or -1.
int64_t first_mismatch(const AlignedBuffer& buf) {
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf.data()[i] != pattern(i)) return static_cast<int64_t>(i);
  }
  return -1;
}

class BlockIoTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    auto probe = make_block_io(options(GetParam()));
    if (!probe.ok() && probe.status().code() == ErrorCode::kUnsupported) {
      GTEST_SKIP() << probe.status().message();
    }
    ASSERT_TRUE(probe.ok()) << probe.status().message();

    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    path_ = ::testing::TempDir() + "block_io_" + name + "_" + std::to_string(::getpid());
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    if (fd_ < 0 && errno == EINVAL) {  // e.g. tmpfs
      std::cerr << "note: " << path_ << " does not support O_DIRECT; testing buffered I/O\n";
      fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    }
    ASSERT_GE(fd_, 0) << path_ << ": " << std::strerror(errno);
  }

  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }

  std::unique_ptr<BlockIo> make(unsigned queue_depth, FaultHook hook = {}) {
    auto io = make_block_io(options(GetParam(), queue_depth, std::move(hook)));
    EXPECT_TRUE(io.ok()) << io.status().message();
    return io.ok() ? std::move(io).value() : nullptr;
  }

  // Request `tag` of the bulk layout: block `tag` of the file and of `buf`.
  Request block(Op op, const AlignedBuffer& buf, uint64_t tag) const {
    return {.op = op,
            .fd = fd_,
            .path = path_,
            .offset = static_cast<int64_t>(tag * kBlock),
            .length = kBlock,
            .buffer = buf.data() + tag * kBlock,
            .tag = tag};
  }

  // Runs `op` on every block of `buf` (kBlocks of them), keeping the queue full as completions
  // arrive, and returns the completions' statuses indexed by tag.
  std::vector<Status> run_blocks(BlockIo& io, Op op, const AlignedBuffer& buf) const {
    std::vector<Status> statuses(kBlocks);
    std::vector<int> seen(kBlocks, 0);
    unsigned submitted = 0;
    unsigned returned = 0;
    while (returned < kBlocks) {
      while (submitted < kBlocks && io.in_flight() < kDepth) {
        const uint64_t tag = (submitted * 37u) % kBlocks;  // out of file order
        EXPECT_TRUE(io.submit(block(op, buf, tag)).ok());
        ++submitted;
        EXPECT_EQ(io.in_flight(), submitted - returned);
      }
      Result<Completion> c = io.wait();
      EXPECT_TRUE(c.ok()) << c.status().message();
      if (!c.ok()) break;
      ++returned;
      EXPECT_EQ(io.in_flight(), submitted - returned);
      EXPECT_LT(c->tag, kBlocks);
      if (c->tag >= kBlocks) continue;
      ++seen[c->tag];
      statuses[c->tag] = c->status;
    }
    for (unsigned tag = 0; tag < kBlocks; ++tag) EXPECT_EQ(seen[tag], 1) << "tag " << tag;
    return statuses;
  }

  static void expect_all_ok(const std::vector<Status>& statuses) {
    for (const Status& s : statuses) EXPECT_TRUE(s.ok()) << s.message();
  }

  // Writes the pattern over kBlocks blocks, then reads it back, through `io`.
  void round_trip(BlockIo& io) const {
    AlignedBuffer out(kBlocks * kBlock);
    AlignedBuffer in(kBlocks * kBlock);
    fill_pattern(out);
    expect_all_ok(run_blocks(io, Op::kWrite, out));
    EXPECT_EQ(file_size(), static_cast<int64_t>(kBlocks * kBlock));
    expect_all_ok(run_blocks(io, Op::kRead, in));
    EXPECT_EQ(first_mismatch(in), -1);
  }

  int64_t file_size() const {
    struct stat st {};
    EXPECT_EQ(::fstat(fd_, &st), 0);
    return st.st_size;
  }

  std::string path_;
  int fd_ = -1;
};

TEST_P(BlockIoTest, ConcurrentWritesThenReadsRoundTrip) {
  auto io = make(kDepth);
  ASSERT_TRUE(io);
  EXPECT_EQ(io->backend(), GetParam());
  round_trip(*io);
  EXPECT_EQ(io->in_flight(), 0u);
}

TEST_P(BlockIoTest, RejectsMisalignedRequestsAndChangesNothing) {
  auto io = make(kDepth);
  ASSERT_TRUE(io);
  AlignedBuffer buf(2 * kBlock);
  fill_pattern(buf);
  const Request good = block(Op::kWrite, buf, 0);
  auto with = [&good](auto change) {
    Request r = good;
    change(r);
    return r;
  };
  const Request bad[] = {
      with([](Request& r) { r.fd = -1; }),
      with([](Request& r) { r.offset = 512; }),
      with([](Request& r) { r.offset = -4096; }),
      with([](Request& r) { r.length = 1000; }),
      with([](Request& r) { r.length = 0; }),
      with([](Request& r) { r.buffer = static_cast<std::byte*>(r.buffer) + 512; }),
      with([](Request& r) { r.buffer = nullptr; }),
  };
  for (const Request& r : bad) {
    const Status s = io->submit(r);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.message();
    EXPECT_NE(s.message().find(path_), std::string::npos) << s.message();
  }
  EXPECT_EQ(io->in_flight(), 0u);
  EXPECT_EQ(io->wait().status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(file_size(), 0);
}

TEST_P(BlockIoTest, RejectsSubmitWhenQueueIsFull) {
  auto io = make(2);
  ASSERT_TRUE(io);
  AlignedBuffer buf(3 * kBlock);
  ASSERT_TRUE(io->submit(block(Op::kWrite, buf, 0)).ok());
  ASSERT_TRUE(io->submit(block(Op::kWrite, buf, 1)).ok());
  const Status full = io->submit(block(Op::kWrite, buf, 2));
  EXPECT_EQ(full.code(), ErrorCode::kResource);
  EXPECT_NE(full.message().find("queue full"), std::string::npos) << full.message();
  EXPECT_EQ(io->in_flight(), 2u);
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(io->wait().ok());
  EXPECT_EQ(io->in_flight(), 0u);
  EXPECT_EQ(file_size(), static_cast<int64_t>(2 * kBlock));  // the third was never written
}

TEST_P(BlockIoTest, WaitWithNothingInFlightFails) {
  auto io = make(kDepth);
  ASSERT_TRUE(io);
  EXPECT_EQ(io->wait().status().code(), ErrorCode::kInvalidArgument);
}

TEST_P(BlockIoTest, InjectedErrorFailsOnlyThatRequest) {
  constexpr uint64_t kVictim = 5;
  auto io = make(kDepth, [](const Request& r, int64_t, size_t) -> int64_t {
    return r.tag == kVictim ? -EIO : 0;
  });
  ASSERT_TRUE(io);
  AlignedBuffer buf(kBlocks * kBlock);
  for (Op op : {Op::kWrite, Op::kRead}) {
    const std::vector<Status> statuses = run_blocks(*io, op, buf);
    for (uint64_t tag = 0; tag < kBlocks; ++tag) {
      const Status& s = statuses[tag];
      if (tag != kVictim) {
        EXPECT_TRUE(s.ok()) << s.message();
        continue;
      }
      EXPECT_EQ(s.code(), ErrorCode::kIo);
      EXPECT_NE(s.message().find(path_), std::string::npos) << s.message();
      const std::string where = "at offset " + std::to_string(kVictim * kBlock);
      EXPECT_NE(s.message().find(where), std::string::npos) << s.message();
    }
  }
}

TEST_P(BlockIoTest, InjectedNoSpaceOnWrite) {
  auto io = make(kDepth, [](const Request& r, int64_t, size_t) -> int64_t {
    return r.op == Op::kWrite ? -ENOSPC : 0;
  });
  ASSERT_TRUE(io);
  AlignedBuffer buf(kBlock);
  ASSERT_TRUE(io->submit(block(Op::kWrite, buf, 0)).ok());
  const Result<Completion> c = io->wait();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->status.code(), ErrorCode::kNoSpace) << c->status.message();
}

TEST_P(BlockIoTest, ShortTransfersAreResumed) {
  // The first transfer of every request moves one page; one request moves a page at a time.
  std::atomic<int> calls{0};
  auto io = make(kDepth, [&calls](const Request& r, int64_t offset, size_t) -> int64_t {
    calls.fetch_add(1, std::memory_order_relaxed);
    return offset == r.offset || r.tag == 7 ? 4096 : 0;
  });
  ASSERT_TRUE(io);
  round_trip(*io);
  // Per pass (write, read): two transfers for each request but 7, which takes kBlock / 4096.
  const int per_pass = 2 * (static_cast<int>(kBlocks) - 1) + static_cast<int>(kBlock / 4096);
  EXPECT_GE(calls.load(), 2 * per_pass);
}

TEST_P(BlockIoTest, ReadPastEndOfFileFails) {
  auto io = make(kDepth);
  ASSERT_TRUE(io);
  AlignedBuffer buf(2 * 4096);
  const Request write{Op::kWrite, fd_, path_, 0, 4096, buf.data(), 1};
  ASSERT_TRUE(io->submit(write).ok());
  ASSERT_TRUE(io->wait()->status.ok());
  // Straddling the end: the first page arrives, the rest meets end of file at 4096.
  const Request straddle{Op::kRead, fd_, path_, 0, 2 * 4096, buf.data(), 2};
  const Request beyond{Op::kRead, fd_, path_, 1 << 20, 4096, buf.data(), 3};
  for (const Request& r : {straddle, beyond}) {
    ASSERT_TRUE(io->submit(r).ok());
    const Result<Completion> c = io->wait();
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->tag, r.tag);
    EXPECT_EQ(c->status.code(), ErrorCode::kCorrupt) << c->status.message();
    const std::string where = "at offset " + std::to_string(std::max<int64_t>(r.offset, 4096));
    for (const std::string& part : {std::string("end of file"), path_, where}) {
      EXPECT_NE(c->status.message().find(part), std::string::npos) << c->status.message();
    }
  }
}

TEST_P(BlockIoTest, DestroyWithRequestsInFlight) {
  AlignedBuffer buf(kBlocks * kBlock);
  fill_pattern(buf);
  for (Op op : {Op::kWrite, Op::kRead}) {
    auto io = make(kBlocks);
    ASSERT_TRUE(io);
    for (uint64_t tag = 0; tag < kBlocks; ++tag) ASSERT_TRUE(io->submit(block(op, buf, tag)).ok());
    ASSERT_TRUE(io->wait().ok());  // one returned, the rest still in flight
    io.reset();
  }
}

TEST(BlockIo, BackendNamesRoundTrip) {
  for (Backend b : {Backend::kUring, Backend::kThreads}) {
    EXPECT_EQ(parse_backend(backend_name(b)).value(), b);
  }
  EXPECT_EQ(parse_backend("aio").status().code(), ErrorCode::kInvalidArgument);
}

TEST(BlockIo, RejectsEmptyQueueOrPool) {
  for (Backend b : {Backend::kUring, Backend::kThreads}) {
    EXPECT_EQ(make_block_io(options(b, 0)).status().code(), ErrorCode::kInvalidArgument);
  }
  BlockIoOptions no_threads = options(Backend::kThreads);
  no_threads.threads = 0;
  EXPECT_EQ(make_block_io(no_threads).status().code(), ErrorCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, BlockIoTest,
                         ::testing::Values(Backend::kUring, Backend::kThreads),
                         [](const auto& p) { return std::string(backend_name(p.param)); });

}  // namespace
}  // namespace deepgrid::io
