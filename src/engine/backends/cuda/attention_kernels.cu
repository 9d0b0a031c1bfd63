#include "engine/backends/cuda/attention_kernels.h"
#include "engine/backends/cuda/device_math.cuh"
#include "engine/backends/cuda/launch.cuh"
#include "engine/backends/cuda/mma.cuh"

namespace surge::engine::cuda {
namespace {

constexpr int kBlockM = 64;  // queries per block: 16 per warp
constexpr int kBlockN = 64;  // keys per tile
constexpr int kWarps = kBlockM / 16;
constexpr int kThreads = kWarps * 32;
constexpr int kNTiles = kBlockN / 8;    // 8-key column tiles of S per warp
constexpr float kMaskedScore = -1e30f;  // padding key: loses to any real key, ties with padding

// 2^x in one MUFU.EX2 (exp2f adds a range check and two conditional multiplies for denormal
// results); results below 2^-126 flush to zero, which a softmax weight can lose.
__device__ __forceinline__ float Exp2Ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The B operand of m16n8k16 with every element 1: P·1 gives each row's sum of the rounded weights
// in every accumulator column, summed by the tensor cores instead of 32 adds per lane and tile.
template <typename T>
__device__ __forceinline__ uint32_t OnesPair();
template <>
__device__ __forceinline__ uint32_t OnesPair<__half>() {
  return 0x3C003C00u;
}
template <>
__device__ __forceinline__ uint32_t OnesPair<__nv_bfloat16>() {
  return 0x3F803F80u;
}

// Shared memory: the Q tile and two K and two V tiles (double-buffered), rows padded by 16 bytes
// so that the 8 row addresses of every ldmatrix fall in distinct banks.
template <int D>
struct Smem {
  static constexpr int kLd = D + 8;  // elements per row
  static constexpr int kTile = kBlockM * kLd;
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + size_t{kTile} * 2;
  static constexpr size_t kV = kK + 2 * size_t{kTile} * 2;
  static constexpr size_t kBytes = kV + 2 * size_t{kTile} * 2;
};

// Issues cp.async copies of `kBlockM` rows of D elements (row stride `stride` elements) into a
// padded shared-memory tile; rows at or past `valid` are zero-filled (no global read), so masked
// products stay finite.
template <int D>
__device__ __forceinline__ void LoadTileAsync(uint32_t dst, const void* src_base, int64_t stride,
                                              int valid) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static_assert(kBlockM * kChunks % kThreads == 0);
  const char* src = static_cast<const char*>(src_base);
#pragma unroll
  for (int it = 0; it < kBlockM * kChunks / kThreads; ++it) {
    const int i = threadIdx.x + it * kThreads;
    const int r = i / kChunks, c = (i % kChunks) * 8;
    const bool ok = r < valid;
    const char* g = ok ? src + (r * stride + c) * 2 : src;
    CpAsync16(dst + (r * Smem<D>::kLd + c) * 2, g, ok);
  }
}

// One block: kBlockM queries of one (sequence, head) against all of the sequence's keys.
// Warp w owns queries q0 + 16w .. +15; in the m16n8 accumulator layout lane l holds rows
// g = l/4 and g+8 and columns 2(l%4), +1 of every 8-column tile.
// Head dims up to 64 fit four blocks per multiprocessor (128 registers a thread); 128 takes two.
// Softmax arithmetic per score: the running maximum is kept on raw scores and each weight is
// exp2(s·c − m·c), c = scale·log2 e (coef below), one FFMA and one MUFU.EX2. kPrescaled (a padding
// mask, or a scale ≤ 0, where the maximum of raw scores is not the maximum of scaled ones) scales
// the scores first, so that a row of masked keys only (each −1e30) still gets exp2(0) = 1 for every
// key.
template <typename T, int D, bool kPrescaled>
__global__ void __launch_bounds__(kThreads, D <= 64 ? 4 : 2) FlashAttentionKernel(AttentionArgs a) {
  WaitForPriorGrids();
  AllowDependentLaunch();
  using S = Smem<D>;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t q_smem = smem_base + S::kQ;
  const uint32_t k_smem = smem_base + S::kK;
  const uint32_t v_smem = smem_base + S::kV;
  constexpr uint32_t kTileBytes = S::kTile * 2;

  const int b = blockIdx.z, head = blockIdx.y, q0 = blockIdx.x * kBlockM;
  const int64_t start = a.cu_seqlens ? a.cu_seqlens[b] : static_cast<int64_t>(b) * a.seq;
  const int len = a.cu_seqlens ? a.cu_seqlens[b + 1] - a.cu_seqlens[b] : a.seq;
  if (q0 >= len) return;
  const int hidden = a.num_heads * D;
  const int64_t stride = 3 * static_cast<int64_t>(hidden);
  const T* base = static_cast<const T*>(a.qkv) + start * stride + head * D;
  const int32_t* kmask = (!a.cu_seqlens && a.key_mask) ? a.key_mask + b * a.seq : nullptr;
  const int n_tiles = (len + kBlockN - 1) / kBlockN;
  const int q_end = a.first_query_only ? 1 : len;  // queries written: [0, q_end)

  // Q, K0, V0 in group 0; K1, V1 in group 1; tile j+2 is issued once tile j is consumed.
  LoadTileAsync<D>(q_smem, base + q0 * stride, stride, len - q0);
  LoadTileAsync<D>(k_smem, base + hidden, stride, len);
  LoadTileAsync<D>(v_smem, base + 2 * hidden, stride, len);
  CpAsyncCommit();
  if (n_tiles > 1) {
    LoadTileAsync<D>(k_smem + kTileBytes, base + kBlockN * stride + hidden, stride, len - kBlockN);
    LoadTileAsync<D>(v_smem + kTileBytes, base + kBlockN * stride + 2 * hidden, stride,
                     len - kBlockN);
    CpAsyncCommit();
  }

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  // A warp whose 16 queries all lie past the sequence (short posts leave up to three of four
  // idle) still shares the tile loads and barriers, but issues no matrix work.
  const bool active = q0 + warp * 16 < q_end;
  // ldmatrix row addresses: A operand (Q rows), non-transposed B (K rows), transposed B (V rows).
  const int a_row = lane & 15, a_col = (lane >> 4) * 8;
  const int kb_row = (lane & 7) + ((lane >> 4) << 3), kb_col = ((lane >> 3) & 1) * 8;
  const int vb_row = (lane & 7) + (((lane >> 3) & 1) << 3), vb_col = (lane >> 4) * 8;

  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  // Row sums of the weights (rows g and g+8 in elements 0 and 2), accumulated by P·1.
  float l[4] = {0.f, 0.f, 0.f, 0.f};
  float m[2] = {-INFINITY, -INFINITY};  // running maxima, in the domain of s
  // exp(x) as exp2(x * log2 e): the scale folds into the exponent's multiply.
  const float scale_log2 = a.scale * 1.4426950408889634f;
  const float coef = kPrescaled ? 1.f : scale_log2;  // exp2 argument = s·coef − m·coef
  const uint32_t ones = OnesPair<T>();

  for (int j = 0; j < n_tiles; ++j) {
    if (j + 1 < n_tiles) {
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();
    if (active) {
      if (j == 0) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          LdMatrixX4(qf[kk], q_smem + ((warp * 16 + a_row) * S::kLd + kk * 16 + a_col) * 2);
        }
      }
      const uint32_t ks = k_smem + (j & 1) * kTileBytes;
      const uint32_t vs = v_smem + (j & 1) * kTileBytes;
      const int k0 = j * kBlockN;

      // S = Q·Kᵀ, 16 queries × 64 keys per warp, float32.
      float s[kNTiles][4];
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t kb[4];
          LdMatrixX4(kb, ks + ((np * 16 + kb_row) * S::kLd + kk * 16 + kb_col) * 2);
          Mma16816<T>(s[2 * np], qf[kk], kb[0], kb[1]);
          Mma16816<T>(s[2 * np + 1], qf[kk], kb[2], kb[3]);
        }
      }

      // Keys past the sequence get -inf; kPrescaled: scaled, padding keys the masked score.
      const bool edge = k0 + kBlockN > len;
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float v = kPrescaled ? s[n][e] * scale_log2 : s[n][e];
          if (edge || (kPrescaled && kmask)) {
            const int key = k0 + n * 8 + 2 * t + (e & 1);
            if (key >= len) {
              v = -INFINITY;
            } else if (kPrescaled && kmask && kmask[key] == 0) {
              v = kMaskedScore;
            }
          }
          s[n][e] = v;
          tile_max[e >> 1] = fmaxf(tile_max[e >> 1], v);
        }
      }
      // Online softmax per row (lanes 4g..4g+3 share rows g and g+8). Every tile holds key k0 <
      // len, so the new maximum is finite; the first tile's correction is exp2(-inf) = 0.
      float corr[2], mc[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
        tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
        const float m_new = fmaxf(m[r], tile_max[r]);
        mc[r] = m_new * coef;
        corr[r] = Exp2Ftz(fmaf(m[r], coef, -mc[r]));
        m[r] = m_new;
      }
      // P = exp2(s·coef − m·coef), rounded to T in the A-operand layout of P·V: the two 8-key tiles
      // 2kk and 2kk+1 form the 16-key k-step kk.
      uint32_t pf[kBlockN / 16][4];
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        const float p0 = Exp2Ftz(fmaf(s[n][0], coef, -mc[0]));
        const float p1 = Exp2Ftz(fmaf(s[n][1], coef, -mc[0]));
        const float p2 = Exp2Ftz(fmaf(s[n][2], coef, -mc[1]));
        const float p3 = Exp2Ftz(fmaf(s[n][3], coef, -mc[1]));
        pf[n >> 1][(n & 1) * 2] = PackPair<T>(p0, p1);
        pf[n >> 1][(n & 1) * 2 + 1] = PackPair<T>(p2, p3);
      }
      if (j > 0) {  // o and l are still zero after the first tile's (zero) correction
#pragma unroll
        for (int i = 0; i < D / 8; ++i) {
          o[i][0] *= corr[0];
          o[i][1] *= corr[0];
          o[i][2] *= corr[1];
          o[i][3] *= corr[1];
        }
        l[0] *= corr[0];
        l[1] *= corr[0];
        l[2] *= corr[1];
        l[3] *= corr[1];
      }
      // O += P·V.
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        Mma16816<T>(l, pf[kk], ones, ones);
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t vb[4];
          LdMatrixX4Trans(vb, vs + ((kk * 16 + vb_row) * S::kLd + dp * 16 + vb_col) * 2);
          Mma16816<T>(o[2 * dp], pf[kk], vb[0], vb[1]);
          Mma16816<T>(o[2 * dp + 1], pf[kk], vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with buffer j & 1
    if (j + 2 < n_tiles) {
      const int k2 = (j + 2) * kBlockN;
      LoadTileAsync<D>(k_smem + (j & 1) * kTileBytes, base + k2 * stride + hidden, stride,
                       len - k2);
      LoadTileAsync<D>(v_smem + (j & 1) * kTileBytes, base + k2 * stride + 2 * hidden, stride,
                       len - k2);
      CpAsyncCommit();
    }
  }

  // Normalise, stage this warp's 16 rows in its own (consumed) Q rows, then 16-byte stores.
  if (!active) return;  // no barrier follows
  // Every lane holds its rows' whole sums (P·1 sums over the k-step's keys across lanes).
  const float inv[2] = {1.f / l[0], 1.f / l[2]};
  T* stage = reinterpret_cast<T*>(smem + S::kQ) + warp * 16 * S::kLd;
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const int c = i * 8 + 2 * t;
    *reinterpret_cast<uint32_t*>(stage + g * S::kLd + c) =
        PackPair<T>(o[i][0] * inv[0], o[i][1] * inv[0]);
    *reinterpret_cast<uint32_t*>(stage + (g + 8) * S::kLd + c) =
        PackPair<T>(o[i][2] * inv[1], o[i][3] * inv[1]);
  }
  __syncwarp();
  constexpr int kChunks = D / 8;
  T* out = a.out ? static_cast<T*>(a.out) + head * D : nullptr;
  uint8_t* qout = a.q.y ? static_cast<uint8_t*>(a.q.y) + head * D : nullptr;
  static_assert(16 * kChunks % 32 == 0);
#pragma unroll
  for (int it = 0; it < 16 * kChunks / 32; ++it) {
    const int i = lane + it * 32;
    const int r = i / kChunks, c = (i % kChunks) * 8;
    const int q = q0 + warp * 16 + r;
    if (q < q_end) {
      alignas(16) T raw[8];
      *reinterpret_cast<int4*>(raw) = *reinterpret_cast<const int4*>(stage + r * S::kLd + c);
      const int64_t row = a.first_query_only ? b : start + q;
      if (out)
        *reinterpret_cast<int4*>(out + row * hidden + c) = *reinterpret_cast<const int4*>(raw);
      if (qout) StoreQuantized8(qout + row * hidden + c, raw, a.q.type, a.q.inv_scale);
    }
  }
}

template <typename T, int D, bool kPrescaled>
cudaError_t Launch(const AttentionArgs& a, cudaStream_t stream) {
  constexpr size_t kBytes = Smem<D>::kBytes;
  // Once per instantiation (and so never inside a CUDA-graph capture after the first eager run).
  static const cudaError_t attr = cudaFuncSetAttribute(
      FlashAttentionKernel<T, D, kPrescaled>, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  if (attr != cudaSuccess) return attr;
  const dim3 grid(a.first_query_only ? 1 : (a.seq + kBlockM - 1) / kBlockM, a.num_heads, a.batch);
  return LaunchKernel(FlashAttentionKernel<T, D, kPrescaled>, grid, dim3(kThreads), kBytes, stream,
                      a);
}

template <typename T, int D>
cudaError_t Launch(const AttentionArgs& a, cudaStream_t stream) {
  const bool masked = !a.cu_seqlens && a.key_mask;
  if (masked || !(a.scale > 0.f)) return Launch<T, D, true>(a, stream);
  return Launch<T, D, false>(a, stream);
}

template <typename T>
cudaError_t LaunchDim(const AttentionArgs& a, cudaStream_t stream) {
  switch (a.head_dim) {
    case 16:
      return Launch<T, 16>(a, stream);
    case 32:
      return Launch<T, 32>(a, stream);
    case 64:
      return Launch<T, 64>(a, stream);
    default:
      return Launch<T, 128>(a, stream);
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool AttentionHeadDimSupported(int head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128;
}

bool AttentionCanImplement(const AttentionArgs& a) {
  return AttentionHeadDimSupported(a.head_dim) && a.batch >= 0 && a.seq >= 0 && a.num_heads > 0 &&
         a.batch <= 65535 && a.num_heads <= 65535 && a.qkv && (a.out || a.q.y) &&
         Aligned16(a.qkv) && (!a.out || Aligned16(a.out)) &&
         reinterpret_cast<uintptr_t>(a.q.y) % 8 == 0;
}

size_t AttentionWorkspaceSize(const AttentionArgs&) { return 0; }

cudaError_t AttentionRun(const AttentionArgs& a, void*, cudaStream_t stream) {
  if (a.batch == 0 || a.seq == 0) return cudaSuccess;
  if (a.dtype == DataType::kF16) return LaunchDim<__half>(a, stream);
  return LaunchDim<__nv_bfloat16>(a, stream);
}

}  // namespace surge::engine::cuda
