#include "megatron_rt/attention.h"

#include "../../../lib/attention_dropout.h"
#include "../cuda_check.h"
#include "common.cuh"

#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <memory>
#include <type_traits>

// FlashAttention-2: the T x T scores only ever exist one 64 x 64 tile at a
// time, in registers and shared memory. Head sizes that are multiples of 16
// run their matrix products on the tensor cores in bf16 (the second half of
// this file); the others run in fp32 on the CUDA cores, as described here.
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
// key tile; blocks add theirs with fp32 atomics into dq, zeroed first. With
// one query head per key/value head, dK and dV of a (key tile, head) are
// written by exactly one block; grouped-query attention writes each query
// head's share into fp32 scratch, and a last sweep sums a group's shares.
//
// q, k and v are pointers with row strides (attention.h): the sections of
// one fused qkv or tensors of their own. Query head h reads key/value head
// h / group.
//
// Every kernel templates on the storage type of q, k, v, out, dout and the
// gradients (float, or bf16 for mixed precision); lse, delta and all
// arithmetic stay fp32. A bf16 dq cannot take the atomics (each addition
// would round), so dQ then accumulates in fp32 scratch, rounded into dq once
// complete.

namespace {

using mrt::cuda::bf16;
using mrt::cuda::computeStream;
using mrt::cuda::fromFloat;

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
  int group;       // query heads per key/value head
  int tiles;       // ceil(T / kTile)
  int heads;       // B * H
  int64_t qRow;    // elements per token of q (and dq): its row stride
  int64_t kvRow;   // elements per token of k and v (and dk, dv)
  int64_t outRow;  // elements per token of out: H D
  int64_t dqRow;   // floats per token of the dQ accumulator (backward)
  // Where the backward kernels write dK and dV: per key/value head at
  // kvRow (group 1), or per query head into [B, T, H, D] fp32 shares.
  int64_t kvOutRow;
  float scale;     // 1/sqrt(D)
  float scaleLog2; // scale log2(e): exp(scale x) = exp2(scaleLog2 x)
  bool vec4;       // every tile row starts 4-element aligned: vector copies
  // Dropout on the probabilities (attention_dropout.h): the forward keeps
  // the softmax's sums those of all probabilities and multiplies the kept
  // ones by 1 / (1 - rate) before P V; the backward redraws the mask.
  mrt::AttentionDropout drop;
};

// The dropout factor of probability (t, key) of the block's head: 1 without
// dropout.
__device__ __forceinline__ float keepFactor(const Geometry &g, int b, int h,
                                            int t, int key) {
  return g.drop.enabled() ? g.drop.factor(g.drop.index(b, h, g.T, t, key))
                          : 1.0f;
}

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

// One kVec group of loadTileAs (src valid even when not `inside`): an fp32
// source goes by cp.async; a bf16 one by plain loads, as cp.async cannot
// widen. A plain store lands at issue, which a cp.async may too: the
// barriers that order the copies order it as well.
template <int kVec, typename Storage>
__device__ __forceinline__ void copyGroup(float *dst, const Storage *src,
                                          bool inside) {
  if constexpr (std::is_same_v<Storage, float>) {
    if constexpr (kVec == 4)
      copyAsync16(dst, src, inside);
    else
      copyAsync4(dst, src, inside);
  } else {
    float v[kVec] = {};
    if (inside)
      mrt::cuda::loadVec(src, v);
    mrt::cuda::storeVec(dst, v);
  }
}

// loadTile with kVec-element copies. A thread always copies the same column
// and steps down the rows. The loop stays rolled: unrolled, the compiler
// hoists every copy's offset out of the key-tile loop into registers.
template <int kHeadDim, int kVec, typename Storage>
__device__ __forceinline__ void loadTileAs(float *tile, const Storage *head,
                                           int64_t ld, int t0,
                                           const Geometry &g) {
  constexpr int kRowCopies = kHeadDim / kVec;
  static_assert(kThreads % kRowCopies == 0, "whole rows per pass");
  constexpr int kRowsPerPass = kThreads / kRowCopies;
  const int rows = min(kTile, g.T - t0);
  const int c = threadIdx.x % kRowCopies * kVec;
  const Storage *first = head + t0 * ld;
  int r = threadIdx.x / kRowCopies;
  int64_t offset = r * ld + c;
  float *dst = tile + r * HeadTile<kHeadDim>::kStride + c;
#pragma unroll 1
  for (; r < kTile; r += kRowsPerPass) {
    const bool inside = r < rows && c < g.D;
    copyGroup<kVec>(dst, inside ? first + offset : head, inside);
    offset += kRowsPerPass * ld;
    dst += kRowsPerPass * HeadTile<kHeadDim>::kStride;
  }
}

// Queues the copy of rows [t0, t0 + kTile) of one head's [T, D] slice (row t
// at head + t * ld) into a padded shared tile. Rows past T and columns past D
// are zero-filled: they then add exact zeros to every product, and stale
// shared memory (NaN, say) never meets a zero probability.
template <int kHeadDim, typename Storage>
__device__ void loadTile(float *tile, const Storage *head, int64_t ld, int t0,
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

// The attention's inputs (a kernel argument): q, k and v at row strides
// g.qRow and g.kvRow.
template <typename Storage> struct Inputs {
  const Storage *q, *k, *v;
};

// The (tile, b*h) pair of a block in the one-dimensional grid: `order` is
// the tile's place in launch order. Every head of (b, h) starts at its
// offset in q, k and v (key/value head h / group) or out and dout.
template <typename Storage> struct BlockHead {
  int order, bh, b, h;
  int64_t outOffset;
  const Storage *q, *k, *v; // the heads' first rows
};

template <typename Storage>
__device__ __forceinline__ BlockHead<Storage>
blockHead(const Inputs<Storage> &in, const Geometry &g) {
  BlockHead<Storage> k;
  k.order = static_cast<int>(blockIdx.x / g.heads);
  k.bh = static_cast<int>(blockIdx.x % g.heads);
  k.b = k.bh / g.H;
  k.h = k.bh % g.H;
  k.outOffset = int64_t(k.b) * g.T * g.outRow + k.h * g.D;
  const int64_t kvOffset = int64_t(k.b) * g.T * g.kvRow + k.h / g.group * g.D;
  k.q = in.q + int64_t(k.b) * g.T * g.qRow + k.h * g.D;
  k.k = in.k + kvOffset;
  k.v = in.v + kvOffset;
  return k;
}

// Row t of query head h's dK (or dV) in `base`: the gradient itself when
// each key/value head has one query head (h is then its key/value head), or
// the fp32 shares [B, T, H, D] of grouped heads.
template <typename Out>
__device__ __forceinline__ Out *kvOutRow(Out *base, int b, int h, int t,
                                         const Geometry &g) {
  return base + (int64_t(b) * g.T + t) * g.kvOutRow + int64_t(h) * g.D;
}

// The thread's place in a 64 x 64 tile (see the top of the file): rows
// row0 + {0..kMicro} and columns col + kGroupLanes {0..kMicro}.
struct Lanes {
  int col, row0;
};

__device__ __forceinline__ Lanes threadLanes() {
  const int lane = threadIdx.x % mrt::cuda::kWarpSize;
  Lanes at;
  at.col = lane % kGroupLanes;
  at.row0 = threadIdx.x / mrt::cuda::kWarpSize * kWarpRows +
            lane / kGroupLanes * kMicro;
  return at;
}

// Causal mask within a diagonal tile, where key and query tiles start
// together: local indices compare as global ones.
__device__ __forceinline__ bool masked(bool diagonal, int key, int query) {
  return diagonal && key > query;
}

// The online softmax of the thread's kMicro query rows, in log2 units. Query
// and key tiles have one size, so every row sees the first key of every key
// tile it visits: max is finite after the first tile and exp2f never sees
// -inf - -inf.
struct SoftmaxRows {
  float max[kMicro], sum[kMicro];

  __device__ __forceinline__ SoftmaxRows() {
#pragma unroll
    for (int i = 0; i < kMicro; ++i)
      max[i] = -INFINITY, sum[i] = 0.0f;
  }

  // Row i (tile row `row`) over one key tile: s holds the raw scores of the
  // keys col + kGroupLanes j, masked and scaled in place; the probabilities
  // times their dropout factors keep[j] go to pRow[key], the sum takes them
  // whole. Returns the factor the row's output shrinks by (0 on the first
  // tile).
  template <typename T>
  __device__ __forceinline__ float update(int i, float (&s)[kMicro],
                                          bool diagonal, int row, int col,
                                          float scaleLog2,
                                          const float (&keep)[kMicro],
                                          T *pRow) {
    float tileMax = -INFINITY;
#pragma unroll
    for (int j = 0; j < kMicro; ++j) {
      // Keys past T fall under the mask too.
      const int key = col + kGroupLanes * j;
      s[j] = masked(diagonal, key, row) ? -INFINITY : s[j] * scaleLog2;
      tileMax = fmaxf(tileMax, s[j]);
    }
    const float newMax = fmaxf(max[i], groupMax(tileMax));
    const float shrink = exp2f(max[i] - newMax);
    max[i] = newMax;
    // Each lane keeps a partial sum of its own columns; the 16 partials are
    // added once, after the last tile.
    float partial = 0.0f;
#pragma unroll
    for (int j = 0; j < kMicro; ++j) {
      const float p = exp2f(s[j] - newMax);
      pRow[col + kGroupLanes * j] = fromFloat<T>(p * keep[j]);
      partial += p;
    }
    sum[i] = sum[i] * shrink + partial;
    return shrink;
  }
};

// The forward's epilogue: O = acc / sum into out, and the log-sum-exp (in
// natural units) into lse, for the query rows q0 + row0 + i. Element e of a
// register row is head column column(e).
template <int kCols, typename Storage, typename Column>
__device__ __forceinline__ void
writeForward(const float (&acc)[kMicro][kCols], const SoftmaxRows &softmax,
             int q0, Lanes at, const BlockHead<Storage> &blk, Storage *out,
             float *lse, const Geometry &g, Column column) {
#pragma unroll
  for (int i = 0; i < kMicro; ++i) {
    const int t = q0 + at.row0 + i;
    const float total = groupSum(softmax.sum[i]);
    if (t >= g.T)
      continue;
    const float inverse = 1.0f / total;
    Storage *o = out + blk.outOffset + t * g.outRow;
#pragma unroll
    for (int e = 0; e < kCols; ++e) {
      const int d = column(e);
      if (d < g.D)
        o[d] = fromFloat<Storage>(acc[i][e] * inverse);
    }
    if (at.col == 0)
      lse[int64_t(blk.bh) * g.T + t] =
          (softmax.max[i] + log2f(total)) * kLn2F;
  }
}

// A backward block's heads: those of BlockHead, the (b, h) slices of dout
// ([B, T, H, D]), lse and delta ([B, H, T]), and the head's dQ accumulator
// (row t at dq + t * dqRow).
template <typename Storage> struct BackwardHeads {
  BlockHead<Storage> blk;
  const Storage *dout;
  const float *lse, *delta;
  float *dq;

  __device__ __forceinline__ BackwardHeads(const Inputs<Storage> &in,
                                           const Storage *dout,
                                           const float *lse,
                                           const float *delta, float *dq,
                                           const Geometry &g)
      : blk(blockHead(in, g)), dout(dout + blk.outOffset),
        lse(lse + int64_t(blk.bh) * g.T), delta(delta + int64_t(blk.bh) * g.T),
        dq(dq + int64_t(blk.b) * g.T * g.dqRow + blk.h * g.D) {}
};


template <int kHeadDim, typename Storage>
__global__ void __launch_bounds__(kThreads, kHeadDim <= 64 ? 2 : 1)
    attentionForward(Inputs<Storage> in, Storage *__restrict__ out,
                     float *__restrict__ lse, Geometry g) {
  using Tile = HeadTile<kHeadDim>;
  constexpr int kCols = Tile::kGroups * 4;
  extern __shared__ float4 sharedRaw[];
  float *sQ = reinterpret_cast<float *>(sharedRaw);
  float *sK = sQ + Tile::kFloats;
  float *sV = sK + Tile::kFloats;
  float *sP = sV + Tile::kFloats;

  // The last query tiles see the most keys: schedule them first.
  const auto blk = blockHead(in, g);
  const int qTile = g.tiles - 1 - blk.order;
  const int q0 = qTile * kTile;
  const Lanes at = threadLanes();
  const int col = at.col, row0 = at.row0;

  loadTile<kHeadDim>(sQ, blk.q, g.qRow, q0, g);
  loadTile<kHeadDim>(sK, blk.k, g.kvRow, 0, g);
  commitAsync();

  float acc[kMicro][kCols] = {};
  SoftmaxRows softmax;

  for (int kTileIndex = 0; kTileIndex <= qTile; ++kTileIndex) {
    loadTile<kHeadDim>(sV, blk.v, g.kvRow, kTileIndex * kTile, g);
    commitAsync();
    waitAsync<1>(); // Q and this K
    __syncthreads();

    float s[kMicro][kMicro] = {};
    rowDots<kHeadDim>(sQ, row0, sK, col, s);

    const bool diagonal = kTileIndex == qTile;
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
      float keep[kMicro];
#pragma unroll
      for (int j = 0; j < kMicro; ++j)
        keep[j] = keepFactor(g, blk.b, blk.h, q0 + row0 + i,
                             kTileIndex * kTile + col + kGroupLanes * j);
      const float shrink =
          softmax.update(i, s[i], diagonal, row0 + i, col, g.scaleLog2, keep,
                         sP + (row0 + i) * kScoreStride);
#pragma unroll
      for (int e = 0; e < kCols; ++e)
        acc[i][e] *= shrink;
    }

    waitAsync<0>(); // V
    // V is visible, P is visible within each warp, and nobody reads K any
    // more: the next K may load during O += P V.
    __syncthreads();
    if (kTileIndex < qTile) {
      loadTile<kHeadDim>(sK, blk.k, g.kvRow, (kTileIndex + 1) * kTile, g);
      commitAsync();
    }
    weightedRows<kHeadDim>(sP, row0, sV, col, acc);
    __syncthreads(); // V and P are overwritten next
  }

  writeForward(acc, softmax, q0, at, blk, out, lse, g,
               [col](int e) { return headColumn(col, e); });
}

// delta[b,h,t] = dout[b,t,h,:] . out[b,t,h,:] = sum_j P[t,j] dP[t,j]: one
// warp per (b, t, h), written in lse's [B,H,T] layout.
template <typename Storage>
__global__ void __launch_bounds__(kThreads)
    attentionDelta(const Storage *__restrict__ out,
                   const Storage *__restrict__ dout, float *__restrict__ delta,
                   Geometry g, int64_t rows) {
  const int lane = threadIdx.x % mrt::cuda::kWarpSize;
  for (int64_t row = blockIdx.x * int64_t(kWarps) +
                     threadIdx.x / mrt::cuda::kWarpSize;
       row < rows; row += int64_t(gridDim.x) * kWarps) {
    const Storage *o = out + row * g.D, *dO = dout + row * g.D;
    float sum = 0.0f;
    for (int d = lane; d < g.D; d += mrt::cuda::kWarpSize)
      sum = fmaf(mrt::cuda::toFloat(o[d]), mrt::cuda::toFloat(dO[d]), sum);
    sum = mrt::cuda::warpReduce(sum, mrt::cuda::SumOp{});
    if (lane == 0) {
      const int64_t bt = row / g.H, b = bt / g.T, t = bt % g.T;
      const int64_t h = row % g.H;
      delta[(b * g.H + h) * g.T + t] = sum;
    }
  }
}

template <int kHeadDim, typename Storage, typename Out>
__global__ void __launch_bounds__(kThreads, kHeadDim <= 64 ? 2 : 1)
    attentionBackward(Inputs<Storage> in, const Storage *__restrict__ dout,
                      const float *__restrict__ lse,
                      const float *__restrict__ delta, Out *dk, Out *dv,
                      float *dq, // may be the gradient itself (fp32)
                      Geometry g) {
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
  const BackwardHeads<Storage> heads(in, dout, lse, delta, dq, g);
  const int kTileIndex = heads.blk.order;
  const int k0 = kTileIndex * kTile;
  // The thread's key rows in the score and dK/dV tiles, and its query rows
  // in the dQ tile.
  const Lanes at = threadLanes();
  const int col = at.col, row0 = at.row0;

  // The per-query inputs of the tile at q0 other than q: dout, lse, delta.
  auto loadQueryGrads = [&](int q0) {
    loadTile<kHeadDim>(sDout, heads.dout, g.outRow, q0, g);
    if (threadIdx.x < 2 * kTile) {
      const int r = threadIdx.x % kTile;
      const float *src = threadIdx.x < kTile ? heads.lse : heads.delta;
      float *dst = threadIdx.x < kTile ? sLse : sDelta;
      const bool inside = q0 + r < g.T;
      copyAsync4(dst + r, inside ? src + q0 + r : src, inside);
    }
  };

  loadTile<kHeadDim>(sK, heads.blk.k, g.kvRow, k0, g);
  loadTile<kHeadDim>(sV, heads.blk.v, g.kvRow, k0, g);
  loadQueryGrads(k0);
  commitAsync();

  float dK[kMicro][kCols] = {}, dV[kMicro][kCols] = {};

  for (int qTileIndex = kTileIndex; qTileIndex < g.tiles; ++qTileIndex) {
    const int q0 = qTileIndex * kTile;
    loadTile<kHeadDim>(sQ, heads.blk.q, g.qRow, q0, g);
    commitAsync();
    waitAsync<0>();
    __syncthreads();

    // Transposed tiles, keys by queries: s = K Q^T, then the kept P^T F^T;
    // dp = V dO^T, then dS^T = P^T (F^T dP^T - delta) with F the dropout
    // factors (the softmax scale is applied later).
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
        // dV; keys past T are later than every real query. (Inline: through
        // a helper shared with attentionBackwardMma, even one taking T by
        // value, ptxas spills this kernel at 128 registers.)
        const bool seen = q0 + r < g.T && !masked(diagonal, row0 + i, r);
        const float p =
            seen ? exp2f(fmaf(s[i][j], g.scaleLog2, -lseLog2)) : 0.0f;
        const float f =
            keepFactor(g, heads.blk.b, heads.blk.h, q0 + r, k0 + row0 + i);
        s[i][j] = p * f;
        dp[i][j] = p * (f * dp[i][j] - rowDelta);
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
      float *dqRow = heads.dq + t * g.dqRow;
#pragma unroll
      for (int e = 0; e < kCols; ++e) {
        int d = headColumn(col, e);
        if (d < g.D)
          atomicAdd(dqRow + d, dQ[i][e] * g.scale);
      }
    }
    __syncthreads(); // Q and the scores are overwritten next
  }

#pragma unroll
  for (int i = 0; i < kMicro; ++i) {
    const int t = k0 + row0 + i;
    if (t >= g.T)
      continue;
    Out *dkRow = kvOutRow(dk, heads.blk.b, heads.blk.h, t, g);
    Out *dvRow = kvOutRow(dv, heads.blk.b, heads.blk.h, t, g);
#pragma unroll
    for (int e = 0; e < kCols; ++e) {
      int d = headColumn(col, e);
      if (d < g.D) {
        dkRow[d] = fromFloat<Out>(dK[i][e] * g.scale);
        dvRow[d] = fromFloat<Out>(dV[i][e]);
      }
    }
  }
}

// --- Tensor-core path: head sizes that are multiples of 16 ----------------
//
// The same tiling, schedule and fp32 softmax as above, but every matrix
// product is a bf16 wmma m16n16k16 product with fp32 accumulation. Q, K, V
// and dO are staged into shared memory by plain loads, rounded to bf16 from
// fp32 storage (cp.async cannot convert) and copied as they are from bf16
// storage; P and dS are rounded as they are written there; the
// statistics (row maxima and sums, lse, delta) and all accumulators stay
// fp32. Only the layout-agnostic wmma API is used: no code depends on which
// lane holds which fragment element, so a product whose result needs
// per-row work (scores, the rescaled output, dQ) goes through an fp32
// shared tile that the threads then read in the CUDA-core mapping above.
// dK and dV need no per-row work and stay in accumulator fragments across
// the query tiles.

namespace wmma = nvcuda::wmma;
using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

constexpr int kMma = 16;    // wmma tile side
constexpr int kHalfPad = 8; // bf16 per row: ldm stays a multiple of 16 bytes
constexpr int kMmaScoreStride = kTile + kHalfPad; // bf16 P and dS tiles
constexpr int kMmaScoreHalves = kTile * kMmaScoreStride;

// The tensor-core path takes every head size it can (the ABI caps D at
// kMaxHeadDim); the fp32 kernels keep the rest.
bool tensorCorePath(int D) { return D % kMma == 0; }

template <int kHeadDim> struct MmaTile {
  static_assert(kHeadDim % kMma == 0, "whole wmma tiles");
  static constexpr int kStride = kHeadDim + kHalfPad; // bf16 head tile
  static constexpr int kHalves = kTile * kStride;
  // fp32 results of kTile rows: scores, or head-wide products.
  static constexpr int kOutStride =
      (kHeadDim > kTile ? kHeadDim : kTile) + kPad;
  static constexpr int kOutFloats = kTile * kOutStride;
  // Accumulator fragments per warp over a kTile x kHeadDim product.
  static constexpr int kWarpBlocks = kTile / kMma * (kHeadDim / kMma) / kWarps;
  static_assert(kWarpBlocks * kWarps * kMma * kMma == kTile * kHeadDim,
                "the warps share a head tile's blocks evenly");
};

// Rows [t0, t0 + kTile) of one head's [T, D] slice (row t at head + t * ld),
// as bf16 into a padded shared tile. Rows past T and columns past D are
// zeros, which add exact zeros to every product.
template <int kHeadDim, int kVec, typename Storage>
__device__ void stageTileAs(bf16 *tile, const Storage *head, int64_t ld,
                            int t0, const Geometry &g) {
  constexpr int kRowCopies = kHeadDim / kVec;
  static_assert(kThreads % kRowCopies == 0, "whole rows per pass");
  const int rows = min(kTile, g.T - t0);
  const int c = threadIdx.x % kRowCopies * kVec;
  for (int r = threadIdx.x / kRowCopies; r < kTile;
       r += kThreads / kRowCopies) {
    bf16 v[kVec] = {};
    if (r < rows && c < g.D)
      mrt::cuda::loadVec<kVec>(head + int64_t(t0 + r) * ld + c, v);
    bf16 *dst = tile + r * MmaTile<kHeadDim>::kStride + c;
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      dst[i] = v[i];
  }
}

template <int kHeadDim, typename Storage>
__device__ void stageTile(bf16 *tile, const Storage *head, int64_t ld, int t0,
                          const Geometry &g) {
  if (g.vec4)
    stageTileAs<kHeadDim, 4>(tile, head, ld, t0, g);
  else
    stageTileAs<kHeadDim, 1>(tile, head, ld, t0, g);
}

template <typename Layout>
__device__ __forceinline__ int elementOffset(int row, int col, int ld) {
  return std::is_same_v<Layout, wmma::row_major> ? row * ld + col
                                                 : col * ld + row;
}

template <int kBlocks>
__device__ __forceinline__ void zero(Accumulator (&acc)[kBlocks]) {
#pragma unroll
  for (int i = 0; i < kBlocks; ++i)
    wmma::fill_fragment(acc[i], 0.0f);
}

// acc[i] += block warp + kWarps i (row-major block order) of the
// [kTile, kN] product A B, with A [kTile, depth] and B [depth, kN] bf16
// shared tiles in the given layouts. depth is a multiple of kMma.
template <int kN, typename LayoutA, typename LayoutB, int kBlocks>
__device__ void warpProduct(Accumulator (&acc)[kBlocks], const bf16 *a,
                            int lda, const bf16 *b, int ldb, int depth) {
  constexpr int kColBlocks = kN / kMma;
  static_assert(kBlocks * kWarps == kTile / kMma * kColBlocks,
                "the warps share the blocks evenly");
  const int warp = threadIdx.x / mrt::cuda::kWarpSize;
#pragma unroll
  for (int i = 0; i < kBlocks; ++i) {
    const int blockIndex = warp + kWarps * i;
    const int row = blockIndex / kColBlocks * kMma;
    const int col = blockIndex % kColBlocks * kMma;
    // Rolled: unrolled, the fragments of every step are loaded at once and
    // the backward kernel spills.
#pragma unroll 1
    for (int k = 0; k < depth; k += kMma) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, LayoutA> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, LayoutB> fb;
      wmma::load_matrix_sync(fa, a + elementOffset<LayoutA>(row, k, lda), lda);
      wmma::load_matrix_sync(fb, b + elementOffset<LayoutB>(k, col, ldb), ldb);
      wmma::mma_sync(acc[i], fa, fb, acc[i]);
    }
  }
}

// The blocks warpProduct<kN> gave this warp, into a row-major fp32 tile.
template <int kN, int kBlocks>
__device__ void storeBlocks(const Accumulator (&acc)[kBlocks], float *c,
                            int ldc) {
  constexpr int kColBlocks = kN / kMma;
  const int warp = threadIdx.x / mrt::cuda::kWarpSize;
#pragma unroll
  for (int i = 0; i < kBlocks; ++i) {
    const int blockIndex = warp + kWarps * i;
    wmma::store_matrix_sync(c + blockIndex / kColBlocks * kMma * ldc +
                                blockIndex % kColBlocks * kMma,
                            acc[i], ldc, wmma::mem_row_major);
  }
}

// c = A B, as warpProduct, into a row-major fp32 shared tile.
template <int kN, typename LayoutA, typename LayoutB>
__device__ void blockProduct(const bf16 *a, int lda, const bf16 *b, int ldb,
                             int depth, float *c, int ldc) {
  Accumulator acc[kTile / kMma * (kN / kMma) / kWarps];
  zero(acc);
  warpProduct<kN, LayoutA, LayoutB>(acc, a, lda, b, ldb, depth);
  storeBlocks<kN>(acc, c, ldc);
}

template <int kHeadDim, typename Storage>
__global__ void __launch_bounds__(kThreads, kHeadDim <= 64 ? 2 : 1)
    attentionForwardMma(Inputs<Storage> in, Storage *__restrict__ out,
                        float *__restrict__ lse, Geometry g) {
  using Tile = MmaTile<kHeadDim>;
  // The thread's head columns: col + kGroupLanes e.
  constexpr int kCols = kHeadDim / kGroupLanes;
  extern __shared__ float4 sharedRaw[];
  float *sOut = reinterpret_cast<float *>(sharedRaw); // S, then P V
  bf16 *sQ = reinterpret_cast<bf16 *>(sOut + Tile::kOutFloats);
  bf16 *sK = sQ + Tile::kHalves;
  bf16 *sV = sK + Tile::kHalves;
  bf16 *sP = sV + Tile::kHalves;

  const auto blk = blockHead(in, g);
  const int qTile = g.tiles - 1 - blk.order;
  const int q0 = qTile * kTile;
  const Lanes at = threadLanes();
  const int col = at.col, row0 = at.row0;
  stageTile<kHeadDim>(sQ, blk.q, g.qRow, q0, g);

  float acc[kMicro][kCols] = {};
  SoftmaxRows softmax;

  for (int kTileIndex = 0; kTileIndex <= qTile; ++kTileIndex) {
    stageTile<kHeadDim>(sK, blk.k, g.kvRow, kTileIndex * kTile, g);
    stageTile<kHeadDim>(sV, blk.v, g.kvRow, kTileIndex * kTile, g);
    __syncthreads();
    blockProduct<kTile, wmma::row_major, wmma::col_major>(
        sQ, Tile::kStride, sK, Tile::kStride, g.D, sOut, Tile::kOutStride);
    __syncthreads();

    const bool diagonal = kTileIndex == qTile;
    float shrink[kMicro];
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
      const float *sRow = sOut + (row0 + i) * Tile::kOutStride;
      float s[kMicro], keep[kMicro];
#pragma unroll
      for (int j = 0; j < kMicro; ++j) {
        s[j] = sRow[col + kGroupLanes * j];
        keep[j] = keepFactor(g, blk.b, blk.h, q0 + row0 + i,
                             kTileIndex * kTile + col + kGroupLanes * j);
      }
      shrink[i] = softmax.update(i, s, diagonal, row0 + i, col, g.scaleLog2,
                                 keep, sP + (row0 + i) * kMmaScoreStride);
    }
    __syncthreads(); // P complete, S read: P V may overwrite it
    blockProduct<kHeadDim, wmma::row_major, wmma::row_major>(
        sP, kMmaScoreStride, sV, Tile::kStride, kTile, sOut, Tile::kOutStride);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kMicro; ++i)
#pragma unroll
      for (int e = 0; e < kCols; ++e)
        acc[i][e] = fmaf(acc[i][e], shrink[i],
                         sOut[(row0 + i) * Tile::kOutStride + col +
                              kGroupLanes * e]);
    // The next iteration's first barrier orders these reads before the
    // next scores overwrite sOut.
  }

  writeForward(acc, softmax, q0, at, blk, out, lse, g,
               [col](int e) { return col + kGroupLanes * e; });
}

// Rows [0, kTile) x columns [0, D) of a row-major fp32 shared tile, times
// `factor`, into rows [t0, T) of one head's slice (row t at head + t * ld):
// stored, or added with atomics (into fp32 only).
template <int kHeadDim, bool kAtomic, typename Storage>
__device__ void writeRows(const float *tile, int ldt, float factor,
                          Storage *head, int64_t ld, int t0,
                          const Geometry &g) {
  static_assert(!kAtomic || std::is_same_v<Storage, float>, "fp32 atomics");
  for (int i = threadIdx.x; i < kTile * kHeadDim; i += kThreads) {
    const int r = i / kHeadDim, d = i % kHeadDim;
    if (t0 + r >= g.T || d >= g.D)
      continue;
    Storage *dst = head + int64_t(t0 + r) * ld + d;
    const float v = tile[r * ldt + d] * factor;
    if constexpr (kAtomic)
      atomicAdd(dst, v);
    else
      *dst = fromFloat<Storage>(v);
  }
}

template <int kHeadDim, typename Storage, typename Out>
__global__ void __launch_bounds__(kThreads, kHeadDim <= 64 ? 2 : 1)
    attentionBackwardMma(Inputs<Storage> in, const Storage *__restrict__ dout,
                         const float *__restrict__ lse,
                         const float *__restrict__ delta, Out *dk, Out *dv,
                         float *dq, // may be the gradient itself (fp32)
                         Geometry g) {
  using Tile = MmaTile<kHeadDim>;
  constexpr int kOutStride = kHeadDim + kPad; // dQ, dK, dV tiles in sScores
  static_assert(kTile * kOutStride <= 2 * kScoreFloats,
                "a head-wide fp32 tile fits where S^T and dP^T were");
  extern __shared__ float4 sharedRaw[];
  float *sScores = reinterpret_cast<float *>(sharedRaw); // S^T [key][query]
  float *sDp = sScores + kScoreFloats;                   // dP^T
  float *sLse = sDp + kScoreFloats;
  float *sDelta = sLse + kTile;
  bf16 *sK = reinterpret_cast<bf16 *>(sDelta + kTile);
  bf16 *sV = sK + Tile::kHalves;
  bf16 *sQ = sV + Tile::kHalves;
  bf16 *sDout = sQ + Tile::kHalves;
  bf16 *sP = sDout + Tile::kHalves; // P^T, bf16 [key][query]
  bf16 *sDs = sP + kMmaScoreHalves; // dS^T

  const BackwardHeads<Storage> heads(in, dout, lse, delta, dq, g);
  const int kTileIndex = heads.blk.order;
  const int k0 = kTileIndex * kTile;

  stageTile<kHeadDim>(sK, heads.blk.k, g.kvRow, k0, g);
  stageTile<kHeadDim>(sV, heads.blk.v, g.kvRow, k0, g);
  Accumulator dK[Tile::kWarpBlocks], dV[Tile::kWarpBlocks];
  zero(dK);
  zero(dV);

  for (int qTileIndex = kTileIndex; qTileIndex < g.tiles; ++qTileIndex) {
    const int q0 = qTileIndex * kTile;
    stageTile<kHeadDim>(sQ, heads.blk.q, g.qRow, q0, g);
    stageTile<kHeadDim>(sDout, heads.dout, g.outRow, q0, g);
    const int r = static_cast<int>(threadIdx.x);
    if (r < kTile && q0 + r < g.T) {
      sLse[r] = heads.lse[q0 + r] * kLog2eF;
      sDelta[r] = heads.delta[q0 + r];
    }
    __syncthreads();
    blockProduct<kTile, wmma::row_major, wmma::col_major>(
        sK, Tile::kStride, sQ, Tile::kStride, g.D, sScores, kScoreStride);
    blockProduct<kTile, wmma::row_major, wmma::col_major>(
        sV, Tile::kStride, sDout, Tile::kStride, g.D, sDp, kScoreStride);
    __syncthreads();

    // The kept P^T F^T and dS^T = P^T (F^T dP^T - delta), keys by queries,
    // one element a thread per step (the softmax scale is applied to dK and
    // dQ later).
    const bool diagonal = qTileIndex == kTileIndex;
    for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
      const int key = i / kTile, query = i % kTile;
      // Queries past T must not reach dK and dV (their lse and delta are
      // never read); keys past T are later than every real query.
      const bool seen = q0 + query < g.T && !masked(diagonal, key, query);
      const float p = seen ? exp2f(fmaf(sScores[key * kScoreStride + query],
                                        g.scaleLog2, -sLse[query]))
                           : 0.0f;
      const float f =
          keepFactor(g, heads.blk.b, heads.blk.h, q0 + query, k0 + key);
      const float ds =
          seen ? p * (f * sDp[key * kScoreStride + query] - sDelta[query])
               : 0.0f;
      sP[key * kMmaScoreStride + query] = __float2bfloat16(p * f);
      sDs[key * kMmaScoreStride + query] = __float2bfloat16(ds);
    }
    __syncthreads();
    warpProduct<kHeadDim, wmma::row_major, wmma::row_major>(
        dV, sP, kMmaScoreStride, sDout, Tile::kStride, kTile);
    warpProduct<kHeadDim, wmma::row_major, wmma::row_major>(
        dK, sDs, kMmaScoreStride, sQ, Tile::kStride, kTile);
    // dQ = dS K: dS [query][key] is dS^T read column-major.
    blockProduct<kHeadDim, wmma::col_major, wmma::row_major>(
        sDs, kMmaScoreStride, sK, Tile::kStride, kTile, sScores, kOutStride);
    __syncthreads();
    writeRows<kHeadDim, true>(sScores, kOutStride, g.scale, heads.dq,
                              g.dqRow, q0, g);
    __syncthreads(); // Q, dO, lse, delta and sScores are overwritten next
  }

  storeBlocks<kHeadDim>(dK, sScores, kOutStride);
  __syncthreads();
  writeRows<kHeadDim, false>(sScores, kOutStride, g.scale,
                             kvOutRow(dk, heads.blk.b, heads.blk.h, 0, g),
                             g.kvOutRow, k0, g);
  __syncthreads();
  storeBlocks<kHeadDim>(dV, sScores, kOutStride);
  __syncthreads();
  writeRows<kHeadDim, false>(sScores, kOutStride, 1.0f,
                             kvOutRow(dv, heads.blk.b, heads.blk.h, 0, g),
                             g.kvOutRow, k0, g);
}

Geometry makeGeometry(int64_t B, int64_t T, int64_t H, int64_t KV,
                      int64_t D, int64_t ldq, int64_t ldkv, bool aligned) {
  if (D < 1 || D > kMaxHeadDim)
    mrt::fatal("attention head dimension %lld outside [1, %d]",
               static_cast<long long>(D), kMaxHeadDim);
  if (KV < 1 || H % KV != 0)
    mrt::fatal("attention: %lld key/value heads do not divide %lld query "
               "heads",
               static_cast<long long>(KV), static_cast<long long>(H));
  Geometry g;
  g.T = mrt::checkedInt(T, "attention sequence length");
  g.H = mrt::checkedInt(H, "attention heads");
  g.D = static_cast<int>(D);
  g.group = static_cast<int>(H / KV);
  g.tiles = static_cast<int>(mrt::cuda::ceilDiv(T, kTile));
  g.heads = mrt::checkedInt(B * H, "attention batch * heads");
  // One block per (tile, b*h) in a one-dimensional grid, and head offsets
  // within a token's row in int.
  mrt::checkedInt(int64_t(g.tiles) * g.heads, "attention blocks");
  g.qRow = mrt::checkedInt(ldq, "attention q row stride");
  g.kvRow = mrt::checkedInt(ldkv, "attention k/v row stride");
  g.outRow = H * D;
  g.dqRow = g.qRow;
  g.kvOutRow = g.group == 1 ? g.kvRow : g.outRow;
  const double scale = 1.0 / std::sqrt(double(D));
  g.scale = static_cast<float>(scale);
  g.scaleLog2 = static_cast<float>(scale * kLog2e);
  // Vector copies need every row of q, k and v 4-element aligned.
  g.vec4 = D % 4 == 0 && ldq % 4 == 0 && ldkv % 4 == 0 && aligned;
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

template <int kHeadDim> constexpr size_t forwardMmaSharedBytes() {
  using Tile = MmaTile<kHeadDim>;
  return Tile::kOutFloats * sizeof(float) +
         (3 * Tile::kHalves + kMmaScoreHalves) * sizeof(bf16);
}

template <int kHeadDim> constexpr size_t backwardMmaSharedBytes() {
  return (2 * kScoreFloats + 2 * kTile) * sizeof(float) +
         (4 * MmaTile<kHeadDim>::kHalves + 2 * kMmaScoreHalves) * sizeof(bf16);
}

// The kernels for head tiles of kHeadDim columns: on the tensor cores when
// D allows it.
template <int kHeadDim, typename Storage>
void launchForward(const Inputs<Storage> &in, Storage *out, float *lse,
                   const Geometry &g) {
  const bool mma = tensorCorePath(g.D);
  const auto kernel = mma ? attentionForwardMma<kHeadDim, Storage>
                          : attentionForward<kHeadDim, Storage>;
  const size_t bytes = mma ? forwardMmaSharedBytes<kHeadDim>()
                           : forwardSharedBytes<kHeadDim>();
  allowSharedBytes(kernel, bytes);
  kernel<<<g.tiles * g.heads, kThreads, bytes, computeStream()>>>(in, out,
                                                                  lse, g);
  MRT_CUDA_CHECK_LAUNCH();
}

template <int kHeadDim, typename Storage, typename Out>
void launchBackward(const Inputs<Storage> &in, const Storage *dout,
                    const float *lse, const float *delta, Out *dk, Out *dv,
                    float *dq, const Geometry &g) {
  const bool mma = tensorCorePath(g.D);
  const auto kernel = mma ? attentionBackwardMma<kHeadDim, Storage, Out>
                          : attentionBackward<kHeadDim, Storage, Out>;
  const size_t bytes = mma ? backwardMmaSharedBytes<kHeadDim>()
                           : backwardSharedBytes<kHeadDim>();
  allowSharedBytes(kernel, bytes);
  kernel<<<g.tiles * g.heads, kThreads, bytes, computeStream()>>>(
      in, dout, lse, delta, dk, dv, dq, g);
  MRT_CUDA_CHECK_LAUNCH();
}

// The finished fp32 dQ ([B*T, H*D]) into a bf16 dq at its row stride.
struct RoundDq {
  const float *scratch;
  bf16 *dq;
  int64_t qRow, outRow;
  template <int kVec> __device__ void apply(int64_t r, int64_t c) const {
    float v[kVec];
    mrt::cuda::loadVec(scratch + r * outRow + c, v);
    mrt::cuda::storeVec(dq + r * qRow + c, v);
  }
};

// dQ sums every key tile's share with atomics: in place in an fp32 dq, in
// fp32 scratch for a bf16 one. Zeroes it, returns it and sets g.dqRow.
template <typename Storage> class DqAccumulator {
public:
  DqAccumulator(Storage *dq, int64_t tokens, Geometry &g) {
    if constexpr (std::is_same_v<Storage, float>) {
      dq_ = dq;
    } else {
      scratch_ = std::make_unique<mrt::cuda::DeviceScratch<float>>(
          tokens * g.outRow);
      dq_ = scratch_->get();
      g.dqRow = g.outRow;
    }
    MRT_CUDA_CHECK(cudaMemset2DAsync(dq_, g.dqRow * sizeof(float), 0,
                                     g.outRow * sizeof(float), tokens,
                                     computeStream()));
  }
  float *get() const { return dq_; }

  // After the backward kernel: a bf16 dq gets its values.
  void finish(Storage *dq, int64_t tokens, const Geometry &g) const {
    if constexpr (!std::is_same_v<Storage, float>)
      mrt::cuda::launchRowSweep(
          tokens, g.outRow, RoundDq{dq_, dq, g.qRow, g.outRow},
          g.vec4 && mrt::cuda::vec4Aligned(dq));
  }

private:
  float *dq_;
  std::unique_ptr<mrt::cuda::DeviceScratch<float>> scratch_;
};

// dK (or dV) of each key/value head: the sum of its query heads' fp32
// shares [B*T, H, D], in head order, into the gradient at its row stride.
template <typename Storage> struct SumGroups {
  const float *shares;
  Storage *grad;
  int64_t kvRow, outRow;
  int group, D;
  template <int kVec> __device__ void apply(int64_t r, int64_t c) const {
    const int64_t kvHead = c / D, d = c % D;
    const float *share = shares + r * outRow + kvHead * group * D + d;
    float sum = 0.0f;
    for (int i = 0; i < group; ++i)
      sum += share[int64_t(i) * D];
    grad[r * kvRow + c] = fromFloat<Storage>(sum);
  }
};

template <typename Storage>
void attentionFwd(const Inputs<Storage> &in, int64_t ldq, int64_t ldkv,
                  Storage *out, float *lse, int64_t B, int64_t T, int64_t H,
                  int64_t KV, int64_t D, const mrt::AttentionDropout &drop) {
  if (B == 0 || T == 0 || H == 0)
    return;
  Geometry g = makeGeometry(
      B, T, H, KV, D, ldq, ldkv,
      mrt::cuda::vec4Aligned(in.q) && mrt::cuda::vec4Aligned(in.k) &&
          mrt::cuda::vec4Aligned(in.v));
  g.drop = drop;
  if (D <= 64)
    launchForward<64>(in, out, lse, g);
  else
    launchForward<128>(in, out, lse, g);
}

// The backward kernels for the head size, writing dK and dV into `dk` and
// `dv` at g.kvOutRow.
template <typename Storage, typename Out>
void backwardInto(const Inputs<Storage> &in, const Storage *dout,
                  const float *lse, const float *delta, Out *dk, Out *dv,
                  float *dq, const Geometry &g) {
  if (g.D <= 64)
    launchBackward<64>(in, dout, lse, delta, dk, dv, dq, g);
  else
    launchBackward<128>(in, dout, lse, delta, dk, dv, dq, g);
}

template <typename Storage>
void attentionBwd(const Inputs<Storage> &in, int64_t ldq, int64_t ldkv,
                  const Storage *out, const Storage *dout, const float *lse,
                  Storage *dq, Storage *dk, Storage *dv, int64_t B, int64_t T,
                  int64_t H, int64_t KV, int64_t D,
                  const mrt::AttentionDropout &drop) {
  if (B == 0 || T == 0 || H == 0)
    return;
  Geometry g = makeGeometry(
      B, T, H, KV, D, ldq, ldkv,
      mrt::cuda::vec4Aligned(in.q) && mrt::cuda::vec4Aligned(in.k) &&
          mrt::cuda::vec4Aligned(in.v) && mrt::cuda::vec4Aligned(dout));
  g.drop = drop;
  const DqAccumulator<Storage> dqAcc(dq, B * T, g);

  const int64_t rows = B * T * H;
  mrt::cuda::DeviceScratch<float> delta(rows);
  const unsigned deltaBlocks = static_cast<unsigned>(
      std::min(mrt::cuda::ceilDiv(rows, kWarps), mrt::cuda::kMaxGridBlocks));
  attentionDelta<<<deltaBlocks, kThreads, 0, computeStream()>>>(
      out, dout, delta.get(), g, rows);
  MRT_CUDA_CHECK_LAUNCH();

  if (g.group == 1) {
    backwardInto(in, dout, lse, delta.get(), dk, dv, dqAcc.get(), g);
  } else {
    // Each query head's share, then a group's sum.
    mrt::cuda::DeviceScratch<float> dkShares(B * T * H * D),
        dvShares(B * T * H * D);
    backwardInto(in, dout, lse, delta.get(), dkShares.get(),
                    dvShares.get(), dqAcc.get(), g);
    for (auto [shares, grad] : {std::pair{dkShares.get(), dk},
                                std::pair{dvShares.get(), dv}})
      mrt::cuda::launchRowSweep(
          B * T, KV * D,
          SumGroups<Storage>{shares, grad, g.kvRow, g.outRow, g.group, g.D},
          /*vec4=*/false);
  }
  dqAcc.finish(dq, B * T, g);
}

} // namespace

using mrt::cuda::asBf16;

namespace {
} // namespace

extern "C" void mrt_attention_fwd_f32(const float *q, const float *k,
                                      const float *v, int64_t ldq,
                                      int64_t ldkv, float *out, float *lse,
                                      int64_t B, int64_t T, int64_t H,
                                      int64_t KV, int64_t D, float dropout,
                                      int64_t seed, int64_t step,
                                      int64_t stream, int64_t batch_offset,
                                      int64_t head_offset,
                                      int64_t global_heads) {
  const mrt::AttentionDropout drop = mrt::attentionDropout(
      dropout, seed, step, stream, batch_offset, head_offset, H, global_heads);
  attentionFwd(Inputs<float>{q, k, v}, ldq, ldkv, out, lse, B, T, H, KV, D,
               drop);
}

extern "C" void mrt_attention_fwd_bf16(const mrt_bf16 *q, const mrt_bf16 *k,
                                       const mrt_bf16 *v, int64_t ldq,
                                       int64_t ldkv, mrt_bf16 *out,
                                       float *lse, int64_t B, int64_t T,
                                       int64_t H, int64_t KV, int64_t D, float dropout,
                                      int64_t seed, int64_t step,
                                      int64_t stream, int64_t batch_offset,
                                      int64_t head_offset,
                                      int64_t global_heads) {
  const mrt::AttentionDropout drop = mrt::attentionDropout(
      dropout, seed, step, stream, batch_offset, head_offset, H, global_heads);
  attentionFwd(Inputs<bf16>{asBf16(q), asBf16(k), asBf16(v)}, ldq, ldkv,
               asBf16(out), lse, B, T, H, KV, D, drop);
}

extern "C" void mrt_attention_bwd_f32(const float *q, const float *k,
                                      const float *v, int64_t ldq,
                                      int64_t ldkv, const float *out,
                                      const float *dout, const float *lse,
                                      float *dq, float *dk, float *dv,
                                      int64_t B, int64_t T, int64_t H,
                                      int64_t KV, int64_t D, float dropout,
                                      int64_t seed, int64_t step,
                                      int64_t stream, int64_t batch_offset,
                                      int64_t head_offset,
                                      int64_t global_heads) {
  const mrt::AttentionDropout drop = mrt::attentionDropout(
      dropout, seed, step, stream, batch_offset, head_offset, H, global_heads);
  attentionBwd(Inputs<float>{q, k, v}, ldq, ldkv, out, dout, lse, dq, dk, dv,
               B, T, H, KV, D, drop);
}

extern "C" void mrt_attention_bwd_bf16(const mrt_bf16 *q, const mrt_bf16 *k,
                                       const mrt_bf16 *v, int64_t ldq,
                                       int64_t ldkv, const mrt_bf16 *out,
                                       const mrt_bf16 *dout, const float *lse,
                                       mrt_bf16 *dq, mrt_bf16 *dk,
                                       mrt_bf16 *dv, int64_t B, int64_t T,
                                       int64_t H, int64_t KV, int64_t D, float dropout,
                                      int64_t seed, int64_t step,
                                      int64_t stream, int64_t batch_offset,
                                      int64_t head_offset,
                                      int64_t global_heads) {
  const mrt::AttentionDropout drop = mrt::attentionDropout(
      dropout, seed, step, stream, batch_offset, head_offset, H, global_heads);
  attentionBwd(Inputs<bf16>{asBf16(q), asBf16(k), asBf16(v)}, ldq, ldkv,
               asBf16(out), asBf16(dout), lse, asBf16(dq), asBf16(dk),
               asBf16(dv), B, T, H, KV, D, drop);
}
