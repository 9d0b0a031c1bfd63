// A one-thread kernel that keeps the stream busy for a given time. Used when timing tactics: with
// the stream held, the host queues a run of launches behind it, so the events around that run
// measure back-to-back device time, not the host's launch rate.
#pragma once

#include "engine/backends/cuda/kernel_common.h"

namespace surge::engine::cuda {

struct DelayArgs {
  int64_t nanoseconds = 0;  // [0, 1e9]
};

bool DelayCanImplement(const DelayArgs& args);
size_t DelayWorkspaceSize(const DelayArgs& args);
cudaError_t DelayRun(const DelayArgs& args, void* workspace, cudaStream_t stream);

}  // namespace surge::engine::cuda
