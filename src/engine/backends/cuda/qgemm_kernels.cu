#include <cuda_runtime.h>

#include "engine/backends/cuda/qgemm.cuh"
#include "engine/backends/cuda/qgemm_kernels.h"

namespace surge::engine::cuda {
namespace {

struct Device {
  bool hopper = false;
  int sm_count = 0;
};

// The current device's properties, read once per device.
const Device& CurrentDevice() {
  constexpr int kMaxDevices = 64;
  static Device devices[kMaxDevices];
  static bool known[kMaxDevices] = {};
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess || d < 0 || d >= kMaxDevices) {
    static const Device none;
    return none;
  }
  if (!known[d]) {
    int major = 0, minor = 0, sms = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d);
    devices[d] = Device{major == 9 && minor == 0, sms};
    known[d] = true;
  }
  return devices[d];
}

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The tile configuration and epilogue of `a`; false when none applies.
bool Select(const QGemmArgs& a, qgemm::TileOps* ops) {
  qgemm::Epilogue e;
  if (!qgemm::EpilogueOf(a, &e)) return false;
  if (a.half) {
    if (a.q_out) return false;
    *ops = a.tile == 1   ? qgemm::Tile64x128Half(e)
           : a.tile == 2 ? qgemm::Tile128x128PingPongHalf(e)
                         : qgemm::TileOps{};
    return ops->run != nullptr;
  }
  switch (a.tile) {
    case 0:
      *ops = qgemm::Tile128x128(a.type, e);
      break;
    case 1:
      *ops = qgemm::Tile64x128(a.type, e);
      break;
    case 2:
      *ops = qgemm::Tile128x128PingPong(a.type, e);
      break;
    case 3:
      *ops = qgemm::Tile128x128PingPongCluster2(a.type, e);
      break;
    case 4:
      *ops = qgemm::Tile128x128PingPongCluster2Overlap(a.type, e);
      break;
    case 5:
      *ops = qgemm::Tile128x128LayerNorm(a.type, e);
      break;
    default:
      return false;
  }
  return ops->run != nullptr;
}

// What CanImplement checks before asking CUTLASS: device, shape, pointers and their alignment.
bool ArgumentsValid(const QGemmArgs& a) {
  if (!CurrentDevice().hopper) return false;
  if (a.m < 1 || a.n < 16 || a.k < 16 || a.n % 16 != 0 || a.k % 16 != 0) return false;
  if (a.m > INT32_MAX || a.n > INT32_MAX || a.k > INT32_MAX) return false;
  if (a.x == nullptr || a.w == nullptr || a.y == nullptr) return false;
  if (a.scale == nullptr && !a.half) return false;
  for (const void* p : {a.x, a.w, static_cast<const void*>(a.scale), a.bias, a.residual,
                        static_cast<const void*>(a.y), static_cast<const void*>(a.ln.gamma),
                        static_cast<const void*>(a.ln.beta), static_cast<const void*>(a.ln.q.y)}) {
    if (p != nullptr && !Aligned(p)) return false;
  }
  if (a.ln.gamma != nullptr &&
      (a.ln.beta == nullptr || !(a.ln.epsilon >= 0.f) || a.ln.q.inv_scale <= 0.f)) {
    return false;
  }
  return true;
}

}  // namespace

int QGemmTileCount() { return 6; }

int QGemmLayerNormTile() { return 5; }

const char* QGemmTileName(int tile) {
  switch (tile) {
    case 0:
      return "128x128x128 cooperative";
    case 1:
      return "64x128x128 ping-pong";
    case 2:
      return "128x128x128 ping-pong";
    case 3:
      return "128x128x128 ping-pong, 2x1 clusters";
    case 4:
      return "128x128x128 ping-pong, 2x1 clusters, overlapped register epilogues";
    case 5:
      return "128x128x128 ping-pong, overlapped register epilogues, LayerNorm in N/128 clusters";
    default:
      return "unknown";
  }
}

bool QGemmCanImplement(const QGemmArgs& a) {
  qgemm::TileOps ops;
  return ArgumentsValid(a) && Select(a, &ops) && ops.can_implement(a, CurrentDevice().sm_count);
}

size_t QGemmWorkspaceSize(const QGemmArgs& a) {
  qgemm::TileOps ops;
  if (!Select(a, &ops)) return 0;
  return ops.workspace_size(a, CurrentDevice().sm_count);
}

cudaError_t QGemmRun(const QGemmArgs& a, void* workspace, cudaStream_t stream) {
  qgemm::TileOps ops;
  if (!ArgumentsValid(a) || !Select(a, &ops)) return cudaErrorInvalidValue;
  return ops.run(a, CurrentDevice().sm_count, workspace, stream);
}

}  // namespace surge::engine::cuda
