#include "megatron_rt/attention.h"

#include "../cuda_check.h"
#include "common.cuh"

#include <cmath>

// FlashAttention-2 in fp32 on the CUDA cores: the T x T scores only ever
// exist one 64 x 64 tile at a time, in registers and shared memory.
//
// Both kernels use 256 threads (8 warps) on 64 x 64 tiles. Warp w owns tile
// rows [8w, 8w+8); within it, lane = 16 * group + col owns rows
// 8w + 4 group + {0..3} and either the score columns col + 16 {0..3} or the
// head-dim columns 64 g + 4 col + {0..3}. A thread's 4 x 4 register tile
// then reads, per 4-deep step, four float4 of its rows (the same for its 16
// lane group: a broadcast) and four float4 of rows col + 16 i of the other
// operand. Shared tiles keep kPad extra floats per row: row stride = 4 (mod
// 32) banks puts the eight rows read by a quarter-warp in distinct banks.
//
// Forward: one block per (query tile, b*h), running softmax over the key
// tiles up to the diagonal. Keys and values are single-buffered but
// overlapped with cp.async: V of tile j loads while S = Q K_j^T runs, and
// K_{j+1} while O += P V_j runs. P goes through a per-warp slice of shared
// memory, so the softmax needs no block barrier.
//
// Backward: one block per (key tile, b*h) keeps dK and dV in registers while
// walking the query tiles from the diagonal down, recomputing P from the
// forward's log-sum-exp. dQ of a query tile gets a contribution from every
// key tile; blocks add theirs with fp32 atomics into the q columns of dqkv,
// zeroed first (the k and v columns are each written by exactly one block).

namespace {

using mrt::cuda::computeStream;

constexpr int kTile = 64;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / mrt::cuda::kWarpSize;
constexpr int kWarpRows = kTile / kWarps; // tile rows per warp
constexpr int kMicro = 4;                 // register tile: kMicro x kMicro
constexpr int kGroupLanes = mrt::cuda::kWarpSize * kMicro / kWarpRows;
constexpr int kPad = 4;
constexpr int kScoreStride = kTile + kPad;
constexpr int kScoreFloats = kTile * kScoreStride;
constexpr int kMaxHeadDim = 128;
static_assert(kGroupLanes * kMicro == kTile,
              "a lane group's register tiles span a tile's columns");
static_assert((kGroupLanes & (kGroupLanes - 1)) == 0,
              "xor shuffles below kGroupLanes stay within a lane group");

constexpr double kLog2e = 1.44269504088896340736;
constexpr float kLog2eF = static_cast<float>(kLog2e);
constexpr float kLn2F = 0.69314718055994530942f;

// Head dimensions run in kernels built for 64 or 128, with the columns past
// D zero-filled.
template <int kHeadDim> struct HeadTile {
  static_assert(kHeadDim % (kGroupLanes * 4) == 0, "whole float4 per lane");
  static constexpr int kStride = kHeadDim + kPad;
  static constexpr int kFloats = kTile * kStride;
  // Head-dim columns per thread in the value-side products: float4 groups.
  static constexpr int kGroups = kHeadDim / (kGroupLanes * 4);
};

struct Geometry {
  int T, H, D;
  int tiles;       // ceil(T / kTile)
  int heads;       // B * H
  int64_t qkvRow;  // floats per token of qkv: 3 H D
  int64_t outRow;  // floats per token of out: H D
  float scale;     // 1/sqrt(D)
  float scaleLog2; // scale log2(e): exp(scale x) = exp2(scaleLog2 x)
  bool vec4;       // every tile row starts 16-byte aligned: 16-byte copies
};

__device__ __forceinline__ unsigned sharedAddress(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// cp.async with src-size 0 when `inside` is false: the destination is
// zero-filled and nothing is read.
__device__ __forceinline__ void copyAsync4(float *dst, const float *src,
                                           bool inside) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(
                   sharedAddress(dst)),
               "l"(src), "r"(inside ? 4 : 0)
               : "memory");
}

__device__ __forceinline__ void copyAsync16(float *dst, const float *src,
                                            bool inside) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   sharedAddress(dst)),
               "l"(src), "r"(inside ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void commitAsync() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most kPending of this thread's committed groups are in
// flight; a barrier must follow before other threads' copies are read.
template <int kPending> __device__ __forceinline__ void waitAsync() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// loadTile with kVec-float copies. A thread always copies the same column
// and steps down the rows. The loop stays rolled: unrolled, the compiler
// hoists every copy's offset out of the key-tile loop into registers.
template <int kHeadDim, int kVec>
__device__ __forceinline__ void loadTileAs(float *tile, const float *head,
                                           int64_t ld, int t0,
                                           const Geometry &g) {
  constexpr int kRowCopies = kHeadDim / kVec;
  static_assert(kThreads % kRowCopies == 0, "whole rows per pass");
  constexpr int kRowsPerPass = kThreads / kRowCopies;
  const int rows = min(kTile, g.T - t0);
  const int c = threadIdx.x % kRowCopies * kVec;
  const float *first = head + t0 * ld;
  int r = threadIdx.x / kRowCopies;
  int64_t offset = r * ld + c;
  float *dst = tile + r * HeadTile<kHeadDim>::kStride + c;
#pragma unroll 1
  for (; r < kTile; r += kRowsPerPass) {
    const bool inside = r < rows && c < g.D;
    if constexpr (kVec == 4)
      copyAsync16(dst, inside ? first + offset : head, inside);
    else
      copyAsync4(dst, inside ? first + offset : head, inside);
    offset += kRowsPerPass * ld;
    dst += kRowsPerPass * HeadTile<kHeadDim>::kStride;
  }
}

// Queues the copy of rows [t0, t0 + kTile) of one head's [T, D] slice (row t
// at head + t * ld) into a padded shared tile. Rows past T and columns past D
// are zero-filled: they then add exact zeros to every product, and stale
// shared memory (NaN, say) never meets a zero probability.
template <int kHeadDim>
__device__ void loadTile(float *tile, const float *head, int64_t ld, int t0,
                         const Geometry &g) {
  if (g.vec4)
    loadTileAs<kHeadDim, 4>(tile, head, ld, t0, g);
  else
    loadTileAs<kHeadDim, 1>(tile, head, ld, t0, g);
}

// Reductions over the 16 lanes that share a row group.
__device__ __forceinline__ float groupMax(float v) {
#pragma unroll
  for (int offset = kGroupLanes / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(mrt::cuda::kFullMask, v, offset));
  return v;
}

__device__ __forceinline__ float groupSum(float v) {
#pragma unroll
  for (int offset = kGroupLanes / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(mrt::cuda::kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ float component(const float4 &v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ const float4 &at4(const float *p) {
  return *reinterpret_cast<const float4 *>(p);
}

// acc[i][j] += a_i . b_j over the head dimension, for the tile rows
// a_i = a[aRow + i] and b_j = b[bCol + kGroupLanes j].
template <int kHeadDim>
__device__ __forceinline__ void rowDots(const float *a, int aRow,
                                        const float *b, int bCol,
                                        float (&acc)[kMicro][kMicro]) {
  constexpr int kStride = HeadTile<kHeadDim>::kStride;
#pragma unroll
  for (int d = 0; d < kHeadDim; d += 4) {
    float4 x[kMicro], y[kMicro];
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
      x[i] = at4(a + (aRow + i) * kStride + d);
      y[i] = at4(b + (bCol + kGroupLanes * i) * kStride + d);
    }
#pragma unroll
    for (int i = 0; i < kMicro; ++i)
#pragma unroll
      for (int j = 0; j < kMicro; ++j) {
        acc[i][j] = fmaf(x[i].x, y[j].x, acc[i][j]);
        acc[i][j] = fmaf(x[i].y, y[j].y, acc[i][j]);
        acc[i][j] = fmaf(x[i].z, y[j].z, acc[i][j]);
        acc[i][j] = fmaf(x[i].w, y[j].w, acc[i][j]);
      }
  }
}

// acc[i][:] += sum_r w[wRow + i][r] * x[r][the thread's head-dim columns]
// over the kTile rows r: w is a [kTile][kScoreStride] weight tile (scores),
// x a head tile.
template <int kHeadDim>
__device__ __forceinline__ void
weightedRows(const float *w, int wRow, const float *x, int col,
             float (&acc)[kMicro][HeadTile<kHeadDim>::kGroups * 4]) {
  using Tile = HeadTile<kHeadDim>;
#pragma unroll
  for (int r = 0; r < kTile; r += 4) {
    float4 weights[kMicro];
#pragma unroll
    for (int i = 0; i < kMicro; ++i)
      weights[i] = at4(w + (wRow + i) * kScoreStride + r);
#pragma unroll
    for (int k = 0; k < 4; ++k)
#pragma unroll
      for (int grp = 0; grp < Tile::kGroups; ++grp) {
        float4 v = at4(x + (r + k) * Tile::kStride +
                       (grp * kGroupLanes + col) * 4);
#pragma unroll
        for (int i = 0; i < kMicro; ++i) {
          float p = component(weights[i], k);
          float *a = acc[i] + grp * 4;
          a[0] = fmaf(p, v.x, a[0]);
          a[1] = fmaf(p, v.y, a[1]);
          a[2] = fmaf(p, v.z, a[2]);
          a[3] = fmaf(p, v.w, a[3]);
        }
      }
  }
}

// Head-dim column of element e of a thread's register row in the value-side
// products (weightedRows).
__device__ __forceinline__ int headColumn(int col, int e) {
  return (e / 4 * kGroupLanes + col) * 4 + e % 4;
}

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, kHeadDim <= 64 ? 2 : 1)
    attentionForward(const float *__restrict__ qkv, float *__restrict__ out,
                     float *__restrict__ lse, Geometry g) {
  using Tile = HeadTile<kHeadDim>;
  constexpr int kCols = Tile::kGroups * 4;
  extern __shared__ float4 sharedRaw[];
  float *sQ = reinterpret_cast<float *>(sharedRaw);
  float *sK = sQ + Tile::kFloats;
  float *sV = sK + Tile::kFloats;
  float *sP = sV + Tile::kFloats;

  // The last query tiles see the most keys: schedule them first.
  const int qTile = g.tiles - 1 - static_cast<int>(blockIdx.x / g.heads);
  const int bh = static_cast<int>(blockIdx.x % g.heads);
  const int b = bh / g.H, h = bh % g.H;
  const int q0 = qTile * kTile;
  const int lane = threadIdx.x % mrt::cuda::kWarpSize;
  const int col = lane % kGroupLanes;
  const int row0 = threadIdx.x / mrt::cuda::kWarpSize * kWarpRows +
                   lane / kGroupLanes * kMicro;

  const float *qHead = qkv + int64_t(b) * g.T * g.qkvRow + h * g.D;
  const float *kHead = qHead + g.H * g.D;
  const float *vHead = kHead + g.H * g.D;

  loadTile<kHeadDim>(sQ, qHead, g.qkvRow, q0, g);
  loadTile<kHeadDim>(sK, kHead, g.qkvRow, 0, g);
  commitAsync();

  // Scores stay in log2 units (scaled by scaleLog2). Query and key tiles
  // have one size, so every row sees the first key of every key tile it
  // visits: rowMax is finite after the first tile and exp2f never sees
  // -inf - -inf.
  float acc[kMicro][kCols] = {};
  float rowMax[kMicro], rowSum[kMicro];
#pragma unroll
  for (int i = 0; i < kMicro; ++i)
    rowMax[i] = -INFINITY, rowSum[i] = 0.0f;

  for (int kTileIndex = 0; kTileIndex <= qTile; ++kTileIndex) {
    loadTile<kHeadDim>(sV, vHead, g.qkvRow, kTileIndex * kTile, g);
    commitAsync();
    waitAsync<1>(); // Q and this K
    __syncthreads();

    float s[kMicro][kMicro] = {};
    rowDots<kHeadDim>(sQ, row0, sK, col, s);

    const bool diagonal = kTileIndex == qTile;
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
      float tileMax = -INFINITY;
#pragma unroll
      for (int j = 0; j < kMicro; ++j) {
        // On the diagonal the key and query tiles start together, so local
        // indices compare as global ones; keys past T fall under it too.
        bool masked = diagonal && col + kGroupLanes * j > row0 + i;
        s[i][j] = masked ? -INFINITY : s[i][j] * g.scaleLog2;
        tileMax = fmaxf(tileMax, s[i][j]);
      }
      float newMax = fmaxf(rowMax[i], groupMax(tileMax));
      float shrink = exp2f(rowMax[i] - newMax); // 0 on the first tile
      rowMax[i] = newMax;
      // Each lane keeps a partial sum of its own columns; the 16 partials
      // are added once, after the last tile.
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kMicro; ++j) {
        float p = exp2f(s[i][j] - newMax);
        sP[(row0 + i) * kScoreStride + col + kGroupLanes * j] = p;
        sum += p;
      }
      rowSum[i] = rowSum[i] * shrink + sum;
#pragma unroll
      for (int e = 0; e < kCols; ++e)
        acc[i][e] *= shrink;
    }

    waitAsync<0>(); // V
    // V is visible, P is visible within each warp, and nobody reads K any
    // more: the next K may load during O += P V.
    __syncthreads();
    if (kTileIndex < qTile) {
      loadTile<kHeadDim>(sK, kHead, g.qkvRow, (kTileIndex + 1) * kTile, g);
      commitAsync();
    }
    weightedRows<kHeadDim>(sP, row0, sV, col, acc);
    __syncthreads(); // V and P are overwritten next
  }

#pragma unroll
  for (int i = 0; i < kMicro; ++i) {
    const int t = q0 + row0 + i;
    const float total = groupSum(rowSum[i]);
    if (t >= g.T)
      continue;
    const float inverse = 1.0f / total;
    float *o = out + (int64_t(b) * g.T + t) * g.outRow + h * g.D;
#pragma unroll
    for (int e = 0; e < kCols; ++e) {
      int d = headColumn(col, e);
      if (d < g.D)
        o[d] = acc[i][e] * inverse;
    }
    if (col == 0)
      lse[int64_t(bh) * g.T + t] = (rowMax[i] + log2f(total)) * kLn2F;
  }
}

// delta[b,h,t] = dout[b,t,h,:] . out[b,t,h,:] = sum_j P[t,j] dP[t,j]: one
// warp per (b, t, h), written in lse's [B,H,T] layout.
__global__ void __launch_bounds__(kThreads)
    attentionDelta(const float *__restrict__ out,
                   const float *__restrict__ dout, float *__restrict__ delta,
                   Geometry g, int64_t rows) {
  const int lane = threadIdx.x % mrt::cuda::kWarpSize;
  for (int64_t row = blockIdx.x * int64_t(kWarps) +
                     threadIdx.x / mrt::cuda::kWarpSize;
       row < rows; row += int64_t(gridDim.x) * kWarps) {
    const float *o = out + row * g.D, *dO = dout + row * g.D;
    float sum = 0.0f;
    for (int d = lane; d < g.D; d += mrt::cuda::kWarpSize)
      sum = fmaf(o[d], dO[d], sum);
    sum = mrt::cuda::warpReduce(sum, mrt::cuda::SumOp{});
    if (lane == 0) {
      const int64_t bt = row / g.H, b = bt / g.T, t = bt % g.T;
      const int64_t h = row % g.H;
      delta[(b * g.H + h) * g.T + t] = sum;
    }
  }
}

template <int kHeadDim>
__global__ void __launch_bounds__(kThreads, kHeadDim <= 64 ? 2 : 1)
    attentionBackward(const float *__restrict__ qkv,
                      const float *__restrict__ dout,
                      const float *__restrict__ lse,
                      const float *__restrict__ delta,
                      float *__restrict__ dqkv, Geometry g) {
  using Tile = HeadTile<kHeadDim>;
  constexpr int kCols = Tile::kGroups * 4;
  extern __shared__ float4 sharedRaw[];
  float *sK = reinterpret_cast<float *>(sharedRaw);
  float *sV = sK + Tile::kFloats;
  float *sQ = sV + Tile::kFloats;
  float *sDout = sQ + Tile::kFloats;
  float *sScores = sDout + Tile::kFloats; // P^T, then dS^T: [key][query]
  float *sLse = sScores + kScoreFloats;
  float *sDelta = sLse + kTile;

  // The first key tiles are seen by the most queries: schedule them first.
  const int kTileIndex = static_cast<int>(blockIdx.x / g.heads);
  const int bh = static_cast<int>(blockIdx.x % g.heads);
  const int b = bh / g.H, h = bh % g.H;
  const int k0 = kTileIndex * kTile;
  const int lane = threadIdx.x % mrt::cuda::kWarpSize;
  const int col = lane % kGroupLanes;
  // The thread's key rows in the score and dK/dV tiles, and its query rows
  // in the dQ tile.
  const int row0 = threadIdx.x / mrt::cuda::kWarpSize * kWarpRows +
                   lane / kGroupLanes * kMicro;

  const int64_t batchQkv = int64_t(b) * g.T * g.qkvRow + h * g.D;
  const float *qHead = qkv + batchQkv;
  const float *kHead = qHead + g.H * g.D;
  const float *vHead = kHead + g.H * g.D;
  const float *doutHead = dout + int64_t(b) * g.T * g.outRow + h * g.D;
  const float *lseHead = lse + int64_t(bh) * g.T;
  const float *deltaHead = delta + int64_t(bh) * g.T;

  // The per-query inputs of the tile at q0 other than q: dout, lse, delta.
  auto loadQueryGrads = [&](int q0) {
    loadTile<kHeadDim>(sDout, doutHead, g.outRow, q0, g);
    if (threadIdx.x < 2 * kTile) {
      const int r = threadIdx.x % kTile;
      const float *src = threadIdx.x < kTile ? lseHead : deltaHead;
      float *dst = threadIdx.x < kTile ? sLse : sDelta;
      const bool inside = q0 + r < g.T;
      copyAsync4(dst + r, inside ? src + q0 + r : src, inside);
    }
  };

  loadTile<kHeadDim>(sK, kHead, g.qkvRow, k0, g);
  loadTile<kHeadDim>(sV, vHead, g.qkvRow, k0, g);
  loadQueryGrads(k0);
  commitAsync();

  float dK[kMicro][kCols] = {}, dV[kMicro][kCols] = {};

  for (int qTileIndex = kTileIndex; qTileIndex < g.tiles; ++qTileIndex) {
    const int q0 = qTileIndex * kTile;
    loadTile<kHeadDim>(sQ, qHead, g.qkvRow, q0, g);
    commitAsync();
    waitAsync<0>();
    __syncthreads();

    // Transposed tiles, keys by queries: s = K Q^T, then P^T; dp = V dO^T,
    // then dS^T = P^T (dP^T - delta) (the softmax scale is applied later).
    float s[kMicro][kMicro] = {}, dp[kMicro][kMicro] = {};
    rowDots<kHeadDim>(sK, row0, sQ, col, s);
    rowDots<kHeadDim>(sV, row0, sDout, col, dp);
    const bool diagonal = qTileIndex == kTileIndex;
#pragma unroll
    for (int j = 0; j < kMicro; ++j) {
      const int r = col + kGroupLanes * j;
      const float lseLog2 = sLse[r] * kLog2eF, rowDelta = sDelta[r];
#pragma unroll
      for (int i = 0; i < kMicro; ++i) {
        // Queries past T (zero rows of the last tile) must not reach dK and
        // dV; keys past T are later than every real query.
        const bool visible = q0 + r < g.T && !(diagonal && row0 + i > r);
        const float p =
            visible ? exp2f(fmaf(s[i][j], g.scaleLog2, -lseLog2)) : 0.0f;
        s[i][j] = p;
        dp[i][j] = p * (dp[i][j] - rowDelta);
      }
    }

#pragma unroll
    for (int i = 0; i < kMicro; ++i)
#pragma unroll
      for (int j = 0; j < kMicro; ++j)
        sScores[(row0 + i) * kScoreStride + col + kGroupLanes * j] = s[i][j];
    __syncwarp(); // each warp reads back only its own key rows
    weightedRows<kHeadDim>(sScores, row0, sDout, col, dV);
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kMicro; ++i)
#pragma unroll
      for (int j = 0; j < kMicro; ++j)
        sScores[(row0 + i) * kScoreStride + col + kGroupLanes * j] = dp[i][j];
    // dS^T is complete for dQ, and dout, lse and delta are free for the next
    // query tile's copies, which overlap dK and dQ.
    __syncthreads();
    if (qTileIndex + 1 < g.tiles) {
      loadQueryGrads(q0 + kTile);
      commitAsync();
    }
    weightedRows<kHeadDim>(sScores, row0, sQ, col, dK);

    // dQ[q][:] = sum_k dS[q][k] K[k][:] for the thread's queries row0 + i:
    // column q of dS^T, read four queries at a time.
    float dQ[kMicro][kCols] = {};
#pragma unroll 8
    for (int k = 0; k < kTile; ++k) {
      const float4 ds = at4(sScores + k * kScoreStride + row0);
#pragma unroll
      for (int grp = 0; grp < Tile::kGroups; ++grp) {
        const float4 kv =
            at4(sK + k * Tile::kStride + (grp * kGroupLanes + col) * 4);
#pragma unroll
        for (int i = 0; i < kMicro; ++i) {
          const float w = component(ds, i);
          float *a = dQ[i] + grp * 4;
          a[0] = fmaf(w, kv.x, a[0]);
          a[1] = fmaf(w, kv.y, a[1]);
          a[2] = fmaf(w, kv.z, a[2]);
          a[3] = fmaf(w, kv.w, a[3]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
      const int t = q0 + row0 + i;
      if (t >= g.T)
        continue;
      float *dq = dqkv + batchQkv + t * g.qkvRow;
#pragma unroll
      for (int e = 0; e < kCols; ++e) {
        int d = headColumn(col, e);
        if (d < g.D)
          atomicAdd(dq + d, dQ[i][e] * g.scale);
      }
    }
    __syncthreads(); // Q and the scores are overwritten next
  }

#pragma unroll
  for (int i = 0; i < kMicro; ++i) {
    const int t = k0 + row0 + i;
    if (t >= g.T)
      continue;
    float *dk = dqkv + batchQkv + t * g.qkvRow + g.H * g.D;
    float *dv = dk + g.H * g.D;
#pragma unroll
    for (int e = 0; e < kCols; ++e) {
      int d = headColumn(col, e);
      if (d < g.D) {
        dk[d] = dK[i][e] * g.scale;
        dv[d] = dV[i][e];
      }
    }
  }
}

Geometry makeGeometry(int64_t B, int64_t T, int64_t H, int64_t D,
                      bool aligned) {
  if (D < 1 || D > kMaxHeadDim)
    mrt::fatal("attention head dimension %lld outside [1, %d]",
               static_cast<long long>(D), kMaxHeadDim);
  Geometry g;
  g.T = mrt::checkedInt(T, "attention sequence length");
  g.H = mrt::checkedInt(H, "attention heads");
  g.D = static_cast<int>(D);
  g.tiles = static_cast<int>(mrt::cuda::ceilDiv(T, kTile));
  g.heads = mrt::checkedInt(B * H, "attention batch * heads");
  // One block per (tile, b*h) in a one-dimensional grid, and head offsets
  // within a token's row in int.
  mrt::checkedInt(int64_t(g.tiles) * g.heads, "attention blocks");
  g.qkvRow = mrt::checkedInt(3 * H * D, "attention qkv columns");
  g.outRow = H * D;
  const double scale = 1.0 / std::sqrt(double(D));
  g.scale = static_cast<float>(scale);
  g.scaleLog2 = static_cast<float>(scale * kLog2e);
  g.vec4 = D % 4 == 0 && aligned;
  return g;
}

template <int kHeadDim> constexpr size_t forwardSharedBytes() {
  return (3 * HeadTile<kHeadDim>::kFloats + kScoreFloats) * sizeof(float);
}

template <int kHeadDim> constexpr size_t backwardSharedBytes() {
  return (4 * HeadTile<kHeadDim>::kFloats + kScoreFloats + 2 * kTile) *
         sizeof(float);
}

// Kernels past 48 KiB of dynamic shared memory must opt in, per device; the
// call is cheap next to the kernels.
template <typename Kernel> void allowSharedBytes(Kernel kernel, size_t bytes) {
  MRT_CUDA_CHECK(cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
      static_cast<int>(bytes)));
}

template <int kHeadDim>
void launchForward(const float *qkv, float *out, float *lse,
                   const Geometry &g) {
  constexpr size_t bytes = forwardSharedBytes<kHeadDim>();
  allowSharedBytes(attentionForward<kHeadDim>, bytes);
  attentionForward<kHeadDim>
      <<<g.tiles * g.heads, kThreads, bytes, computeStream()>>>(qkv, out, lse,
                                                                 g);
  MRT_CUDA_CHECK_LAUNCH();
}

template <int kHeadDim>
void launchBackward(const float *qkv, const float *dout, const float *lse,
                    const float *delta, float *dqkv, const Geometry &g) {
  constexpr size_t bytes = backwardSharedBytes<kHeadDim>();
  allowSharedBytes(attentionBackward<kHeadDim>, bytes);
  attentionBackward<kHeadDim>
      <<<g.tiles * g.heads, kThreads, bytes, computeStream()>>>(
          qkv, dout, lse, delta, dqkv, g);
  MRT_CUDA_CHECK_LAUNCH();
}

} // namespace

extern "C" void mrt_attention_fwd_f32(const float *qkv, float *out, float *lse,
                                      int64_t B, int64_t T, int64_t H,
                                      int64_t D) {
  if (B == 0 || T == 0 || H == 0)
    return;
  const Geometry g = makeGeometry(B, T, H, D, mrt::cuda::aligned16(qkv));
  if (D <= 64)
    launchForward<64>(qkv, out, lse, g);
  else
    launchForward<128>(qkv, out, lse, g);
}

extern "C" void mrt_attention_bwd_f32(const float *qkv, const float *out,
                                      const float *dout, const float *lse,
                                      float *dqkv, int64_t B, int64_t T,
                                      int64_t H, int64_t D) {
  if (B == 0 || T == 0 || H == 0)
    return;
  const Geometry g =
      makeGeometry(B, T, H, D,
                   mrt::cuda::aligned16(qkv) && mrt::cuda::aligned16(dout));
  cudaStream_t stream = computeStream();

  // The q columns of dqkv accumulate every key tile's share of dQ.
  MRT_CUDA_CHECK(cudaMemset2DAsync(dqkv, g.qkvRow * sizeof(float), 0,
                                   g.outRow * sizeof(float), B * T, stream));

  const int64_t rows = B * T * H;
  mrt::cuda::DeviceScratch<float> delta(rows);
  const unsigned deltaBlocks = static_cast<unsigned>(
      std::min(mrt::cuda::ceilDiv(rows, kWarps), mrt::cuda::kMaxGridBlocks));
  attentionDelta<<<deltaBlocks, kThreads, 0, stream>>>(out, dout, delta.get(),
                                                      g, rows);
  MRT_CUDA_CHECK_LAUNCH();

  if (D <= 64)
    launchBackward<64>(qkv, dout, lse, delta.get(), dqkv, g);
  else
    launchBackward<128>(qkv, dout, lse, delta.get(), dqkv, g);
}
