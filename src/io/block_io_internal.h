// internal: what the two BlockIo backends share (defined in block_io.cc).
#pragma once

#include <cstdint>
#include <memory>

#include "io/block_io.h"

namespace deepgrid::io::detail {

// Checks the alignment contract and the request's fields.
Status check_request(const Request& request);
// The bytes the next transfer of `request` at `offset` may move (asking the fault hook), or a
// negative errno the hook injects.
int64_t plan_transfer(const FaultHook& hook, const Request& request, int64_t offset,
                      size_t remaining);
// Turns one transfer's result (bytes, or a negative errno) into a Status with file and offset.
Status transfer_status(const Request& request, int64_t offset, int64_t result);
Status queue_full(unsigned queue_depth);
Status nothing_in_flight();

Result<std::unique_ptr<BlockIo>> make_uring_block_io(const BlockIoOptions& options);
Result<std::unique_ptr<BlockIo>> make_threads_block_io(const BlockIoOptions& options);

}  // namespace deepgrid::io::detail
