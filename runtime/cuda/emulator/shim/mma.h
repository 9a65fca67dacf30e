// The layout-agnostic subset of nvcuda::wmma the kernels use, for the CPU
// emulator: bf16 m16n16k16 fragments (matrix_a and matrix_b, row or column
// major) with float accumulators, and fill_fragment, load_matrix_sync,
// store_matrix_sync and mma_sync. Anything else fails to compile.
//
// Every call is collective, as on the GPU: the 32 lanes of a warp must all
// make it, with the same pointer, leading dimension and layout (or fill
// value); otherwise the emulator fails (emu::warpCollective). A lane's
// fragment holds tile elements lane + 32 i, which is not the GPU's layout,
// so a kernel that depends on which lane holds which element gets wrong
// results here. Products take the bf16 inputs exactly (a bf16 x bf16
// product is exact in float) and add in float, in k order.
#ifndef MEGATRON_RT_CUDA_EMULATOR_MMA_H
#define MEGATRON_RT_CUDA_EMULATOR_MMA_H

#include "cuda_bf16.h"
#include "cuda_runtime.h"

#include <type_traits>

namespace emu {
// Publishes `bytes` (at most kCollectiveBytes) of this lane's data under
// `operation`, waits until every lane of the warp has, and copies the 32
// lanes' data to `lanes`, lane l's at l * bytes. Fails if a lane of the warp
// ended or reached another wmma call, a shuffle or a __syncwarp instead.
constexpr size_t kCollectiveBytes = 64;
void warpCollective(const char *operation, const void *data, size_t bytes,
                    void *lanes);
unsigned currentLane();
[[noreturn]] void failCollective(const char *operation, const char *problem);
} // namespace emu

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

constexpr int kFragmentSide = 16;
constexpr int kFragmentElements = kFragmentSide * kFragmentSide / 32;

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "only m16n16k16 is emulated");
  static_assert(std::is_same_v<Use, accumulator>
                    ? std::is_same_v<T, float> && std::is_void_v<Layout>
                    : std::is_same_v<T, __nv_bfloat16> &&
                          (std::is_same_v<Layout, row_major> ||
                           std::is_same_v<Layout, col_major>),
                "only bf16 row/col-major operands and float accumulators "
                "without a layout are emulated");
  static constexpr int num_elements = kFragmentElements;
  T x[num_elements];
};

namespace detail {

// Tile element (row, col) held as element i of this lane's fragment.
inline int row(int i) { return (emu::currentLane() + 32 * i) / kFragmentSide; }
inline int col(int i) { return (emu::currentLane() + 32 * i) % kFragmentSide; }

struct Access {
  const void *pointer;
  unsigned ldm;
  bool colMajor;
};

// The warp-uniform arguments of a load or store, checked as the PTX
// requires: a 256-bit aligned pointer, ldm a multiple of 16 bytes.
inline void checkAccess(const char *operation, const void *p, unsigned ldm,
                        bool colMajor, size_t elementBytes) {
  const Access mine{p, ldm, colMajor};
  Access all[32];
  emu::warpCollective(operation, &mine, sizeof mine, all);
  for (const Access &other : all)
    if (other.pointer != p || other.ldm != ldm || other.colMajor != colMajor)
      emu::failCollective(operation, "lanes passed different arguments");
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    emu::failCollective(operation, "pointer not 256-bit aligned");
  if (ldm * elementBytes % 16 != 0 || ldm < kFragmentSide)
    emu::failCollective(operation, "ldm not a multiple of 16 bytes");
}

inline size_t offset(int r, int c, unsigned ldm, bool colMajor) {
  return colMajor ? size_t(c) * ldm + r : size_t(r) * ldm + c;
}

template <typename Fragment, typename T>
void load(Fragment &f, const T *p, unsigned ldm, bool colMajor) {
  checkAccess("wmma::load_matrix_sync", p, ldm, colMajor, sizeof(T));
  for (int i = 0; i < Fragment::num_elements; ++i)
    f.x[i] = p[offset(row(i), col(i), ldm, colMajor)];
}

// The 16 x 16 tile of an operand from its 32 lanes' elements.
inline void gather(const __nv_bfloat16 (&lanes)[32][kFragmentElements],
                   float (&tile)[kFragmentSide][kFragmentSide]) {
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < kFragmentElements; ++i) {
      const int e = lane + 32 * i;
      tile[e / kFragmentSide][e % kFragmentSide] =
          __bfloat162float(lanes[lane][i]);
    }
}

} // namespace detail

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, T value) {
  T all[32];
  emu::warpCollective("wmma::fill_fragment", &value, sizeof value, all);
  for (const T &other : all)
    if (std::memcmp(&other, &value, sizeof value) != 0)
      emu::failCollective("wmma::fill_fragment",
                          "lanes filled different values");
  for (T &x : f.x)
    x = value;
}

template <typename Use, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout> &f,
                      const __nv_bfloat16 *p, unsigned ldm) {
  detail::load(f, p, ldm, std::is_same_v<Layout, col_major>);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f,
                             const float *p, unsigned ldm, layout_t layout) {
  detail::load(f, p, ldm, layout == mem_col_major);
}

inline void store_matrix_sync(float *p,
                              const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ldm, layout_t layout) {
  const bool colMajor = layout == mem_col_major;
  detail::checkAccess("wmma::store_matrix_sync", p, ldm, colMajor,
                      sizeof(float));
  for (int i = 0; i < kFragmentElements; ++i)
    p[detail::offset(detail::row(i), detail::col(i), ldm, colMajor)] = f.x[i];
}

// d = a b + c; d may be c. Only a and b cross lanes: d's elements are c's
// of the same lane.
template <typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA> &a,
              const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  struct Operands {
    __nv_bfloat16 a[kFragmentElements], b[kFragmentElements];
  } mine, all[32];
  static_assert(sizeof(Operands) <= emu::kCollectiveBytes, "slot size");
  std::memcpy(mine.a, a.x, sizeof mine.a);
  std::memcpy(mine.b, b.x, sizeof mine.b);
  emu::warpCollective("wmma::mma_sync", &mine, sizeof mine, all);
  __nv_bfloat16 lanesA[32][kFragmentElements], lanesB[32][kFragmentElements];
  for (int lane = 0; lane < 32; ++lane) {
    std::memcpy(lanesA[lane], all[lane].a, sizeof mine.a);
    std::memcpy(lanesB[lane], all[lane].b, sizeof mine.b);
  }
  float ta[kFragmentSide][kFragmentSide], tb[kFragmentSide][kFragmentSide];
  detail::gather(lanesA, ta);
  detail::gather(lanesB, tb);
  for (int i = 0; i < kFragmentElements; ++i) {
    const int r = detail::row(i), n = detail::col(i);
    float sum = c.x[i];
    for (int k = 0; k < kFragmentSide; ++k)
      sum += ta[r][k] * tb[k][n];
    d.x[i] = sum;
  }
}

} // namespace nvcuda::wmma

#endif // MEGATRON_RT_CUDA_EMULATOR_MMA_H
