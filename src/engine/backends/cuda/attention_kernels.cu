#include <mma.h>

#include "engine/backends/cuda/attention_kernels.h"
#include "engine/backends/cuda/device_math.cuh"

namespace surge::engine::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kBlockM = 64;  // queries per block (16 per warp)
constexpr int kBlockN = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr float kMaskedScore = -1e30f;  // padding key: loses to any real key, ties with padding

// Shared-memory layout; row pitches padded (by 16 bytes for 2-byte rows, 16 for floats) against
// bank conflicts, and every WMMA pointer stays 32-byte aligned.
template <int D>
struct Smem {
  static constexpr int kLdT = D + 8;        // Q, K, V rows
  static constexpr int kLdS = kBlockN + 4;  // float scores
  static constexpr int kLdP = kBlockN + 8;  // probabilities
  static constexpr int kLdO = D + 4;        // float output accumulators
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + size_t{kBlockM} * kLdT * 2;
  static constexpr size_t kV = kK + size_t{kBlockN} * kLdT * 2;
  static constexpr size_t kS = kV + size_t{kBlockN} * kLdT * 2;
  static constexpr size_t kP = kS + size_t{kBlockM} * kLdS * 4;
  static constexpr size_t kO = kP + size_t{kBlockM} * kLdP * 2;
  static constexpr size_t kBytes = kO + size_t{kBlockM} * kLdO * 4;
};

// Copies `rows` rows of D elements (row stride `stride` elements) into shared memory with 16-byte
// accesses; rows at or past `valid` are zero-filled so masked products stay finite.
template <typename T, int D>
__device__ __forceinline__ void LoadTile(T* dst, const T* src, int64_t stride, int valid) {
  constexpr int kVecPerRow = D / 8;
  for (int i = threadIdx.x; i < kBlockM * kVecPerRow; i += kThreads) {
    const int r = i / kVecPerRow, c = (i % kVecPerRow) * 8;
    int4 v = make_int4(0, 0, 0, 0);
    if (r < valid) v = *reinterpret_cast<const int4*>(src + r * stride + c);
    *reinterpret_cast<int4*>(dst + r * Smem<D>::kLdT + c) = v;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) AttentionKernel(AttentionArgs a) {
  using S = Smem<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem + S::kQ);
  T* ks = reinterpret_cast<T*>(smem + S::kK);
  T* vs = reinterpret_cast<T*>(smem + S::kV);
  float* ss = reinterpret_cast<float*>(smem + S::kS);
  T* ps = reinterpret_cast<T*>(smem + S::kP);
  float* os = reinterpret_cast<float*>(smem + S::kO);

  const int b = blockIdx.z, head = blockIdx.y, q0 = blockIdx.x * kBlockM;
  const int64_t start = a.cu_seqlens ? a.cu_seqlens[b] : static_cast<int64_t>(b) * a.seq;
  const int len = a.cu_seqlens ? a.cu_seqlens[b + 1] - a.cu_seqlens[b] : a.seq;
  if (q0 >= len) return;
  const int hidden = a.num_heads * D;
  const int64_t stride = 3 * static_cast<int64_t>(hidden);
  const T* base = static_cast<const T*>(a.qkv) + start * stride + head * D;
  const int32_t* kmask = (!a.cu_seqlens && a.key_mask) ? a.key_mask + b * a.seq : nullptr;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = lane >> 1;  // this lane's row within the warp's 16 queries
  const int half = lane & 1;  // which half of the row's columns it handles
  T* qw = qs + warp * 16 * S::kLdT;
  float* sw = ss + warp * 16 * S::kLdS;
  T* pw = ps + warp * 16 * S::kLdP;
  float* ow = os + warp * 16 * S::kLdO;

  LoadTile<T, D>(qs, base + q0 * stride, stride, len - q0);
  for (int i = lane; i < 16 * D; i += 32) ow[(i / D) * S::kLdO + i % D] = 0.f;
  float m = -INFINITY, l = 0.f;
  // exp(x) as exp2(x * log2 e): the scale folds into one multiply.
  const float scale_log2 = a.scale * 1.4426950408889634f;
  const float masked_log2 = kMaskedScore;

  for (int k0 = 0; k0 < len; k0 += kBlockN) {
    __syncthreads();  // previous tile's K/V reads done
    LoadTile<T, D>(ks, base + k0 * stride + hidden, stride, len - k0);
    LoadTile<T, D>(vs, base + k0 * stride + 2 * hidden, stride, len - k0);
    __syncthreads();

    // S = Q·Kᵀ for this warp's 16 queries × 64 keys.
#pragma unroll
    for (int j = 0; j < kBlockN / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, qw + kk * 16, S::kLdT);
        wmma::load_matrix_sync(fb, ks + j * 16 * S::kLdT + kk * 16, S::kLdT);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(sw + j * 16, acc, S::kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: each lane pair owns one query row.
    float* srow = sw + row * S::kLdS + half * (kBlockN / 2);
    float tile_max = -INFINITY;
#pragma unroll 8
    for (int c = 0; c < kBlockN / 2; ++c) {
      const int key = k0 + half * (kBlockN / 2) + c;
      float s;
      if (key >= len) {
        s = -INFINITY;
      } else if (kmask && kmask[key] == 0) {
        s = masked_log2;
      } else {
        s = srow[c] * scale_log2;
      }
      srow[c] = s;
      tile_max = fmaxf(tile_max, s);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float m_new = fmaxf(m, tile_max);  // finite: the tile holds at least one key < len
    const float corr = exp2f(m - m_new);
    float sum = 0.f;
    T* prow = pw + row * S::kLdP + half * (kBlockN / 2);
#pragma unroll 8
    for (int c = 0; c < kBlockN / 2; ++c) {
      const float p = exp2f(srow[c] - m_new);
      const T pt = FromFloat<T>(p);
      prow[c] = pt;
      sum += ToFloat(pt);  // the sum matches the rounded weights P·V uses
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * corr + sum;
    m = m_new;
    float* orow = ow + row * S::kLdO + half * (D / 2);
#pragma unroll 8
    for (int c = 0; c < D / 2; ++c) orow[c] *= corr;
    __syncwarp();

    // O += P·V.
#pragma unroll
    for (int j = 0; j < D / 16; ++j) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, ow + j * 16, S::kLdO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
        wmma::load_matrix_sync(fa, pw + kk * 16, S::kLdP);
        wmma::load_matrix_sync(fb, vs + kk * 16 * S::kLdT + j * 16, S::kLdT);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(ow + j * 16, acc, S::kLdO, wmma::mem_row_major);
    }
    __syncwarp();
  }

  const int q = q0 + warp * 16 + row;
  if (q < len) {
    const float inv = 1.f / l;
    const float* orow = ow + row * S::kLdO + half * (D / 2);
    T* out = static_cast<T*>(a.out) + (start + q) * hidden + head * D + half * (D / 2);
#pragma unroll 8
    for (int c = 0; c < D / 2; ++c) out[c] = FromFloat<T>(orow[c] * inv);
  }
}

template <typename T, int D>
cudaError_t Launch(const AttentionArgs& a, cudaStream_t stream) {
  constexpr size_t kBytes = Smem<D>::kBytes;
  // Once per instantiation (and so never inside a CUDA-graph capture after the first eager run).
  static const cudaError_t attr = cudaFuncSetAttribute(
      AttentionKernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid((a.seq + kBlockM - 1) / kBlockM, a.num_heads, a.batch);
  AttentionKernel<T, D><<<grid, kThreads, kBytes, stream>>>(a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchDim(const AttentionArgs& a, cudaStream_t stream) {
  switch (a.head_dim) {
    case 32:
      return Launch<T, 32>(a, stream);
    case 64:
      return Launch<T, 64>(a, stream);
    default:
      return Launch<T, 128>(a, stream);
  }
}

}  // namespace

bool AttentionCanImplement(const AttentionArgs& a) {
  const bool dim_ok = a.head_dim == 32 || a.head_dim == 64 || a.head_dim == 128;
  return dim_ok && a.batch >= 0 && a.seq >= 0 && a.num_heads > 0 && a.batch <= 65535 &&
         a.num_heads <= 65535 && a.qkv && a.out && (reinterpret_cast<uintptr_t>(a.qkv) % 16) == 0;
}

size_t AttentionWorkspaceSize(const AttentionArgs&) { return 0; }

cudaError_t AttentionRun(const AttentionArgs& a, void*, cudaStream_t stream) {
  if (a.batch == 0 || a.seq == 0) return cudaSuccess;
  if (a.dtype == DataType::kF16) return LaunchDim<__half>(a, stream);
  return LaunchDim<__nv_bfloat16>(a, stream);
}

}  // namespace surge::engine::cuda
