// Every entry point of the CUDA kernels (runtime/cuda/lib/kernels), run in
// the CPU emulator (README.md) against the CPU runtime it must agree with.
// Sizes leave partial tiles, warps and vector groups; "misaligned" puts
// buffers one element past a 16-byte boundary (the kernels' scalar paths);
// "aliased" writes outputs over inputs where the ABI allows it. Outputs
// start as NaN, so an element a kernel does not write shows, and guard
// elements around every buffer catch writes out of bounds. The _bf16 entry
// points run the f32 cases ("_bf16" in the name) on inputs rounded to bf16,
// against the CPU's _f32 entry points on the same (widened) values.
#include "gpu_entry_points.h"

#include "megatron_rt/attention.h"
#include "megatron_rt/cross_entropy.h"
#include "megatron_rt/dropout.h"
#include "megatron_rt/embedding.h"
#include "megatron_rt/layernorm.h"
#include "megatron_rt/optimizer.h"
#include "megatron_rt/reduce.h"
#include "megatron_rt/rope.h"

#include "TestUtil.h"

#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>

#include <unistd.h>

using namespace mrt_test;

namespace {

#define SAME_SIGNATURE(name)                                                   \
  static_assert(std::is_same_v<decltype(name), decltype(gpu_##name)>,          \
                #name " differs between the CPU and CUDA runtimes");
MEGATRON_RT_GPU_ENTRY_POINTS(SAME_SIGNATURE)

constexpr double kExact = 0.0;

// How a kernel stores a tensor: the _f32 entry points' float, or the _bf16
// ones' bfloat16.
enum class Storage { f32, bf16 };

// Unit roundoff of bf16 (8 significant bits): rounding to nearest moves a
// value by at most u relative.
constexpr double kBf16Roundoff = 1.0 / 256;

float widenBf16(uint16_t bits) { return __bfloat162float(__nv_bfloat16{bits}); }

uint16_t narrowBf16(float value) { return __float2bfloat16(value).bits; }

float roundToBf16(float value) { return widenBf16(narrowBf16(value)); }

std::vector<float> roundToBf16(std::vector<float> values) {
  for (float &v : values)
    v = roundToBf16(v);
  return values;
}

// Device memory as a kernel sees it: the values as float or bf16, on a
// 16-byte boundary or one element past it, between guard elements that must
// survive every call.
class Buffer {
public:
  Buffer(const std::vector<float> &values, bool misaligned = false,
         Storage storage = Storage::f32)
      : storage_(storage), width_(storage == Storage::f32 ? 4 : 2),
        size_(values.size()), offset_(kGuard + (misaligned ? 1 : 0)),
        bytes_((size_ + 2 * kGuard + 1) * width_) {
    for (size_t i = 0; i < size_ + 2 * kGuard + 1; ++i)
      put(i, guardBits());
    for (size_t i = 0; i < size_; ++i)
      setValue(i, values[i]);
  }
  static Buffer garbage(size_t size, bool misaligned = false,
                        Storage storage = Storage::f32) {
    return Buffer(std::vector<float>(size, NAN), misaligned, storage);
  }

  // Converts to the pointer type of an entry point's argument, which must
  // be this buffer's storage: a test that passes a float buffer where bf16
  // is expected (or back) ends here, not in wrong numbers.
  class Pointer {
  public:
    operator float *() const { return as<float>(Storage::f32); }
    operator mrt_bf16 *() const { return as<mrt_bf16>(Storage::bf16); }

  private:
    friend class Buffer;
    Pointer(unsigned char *p, Storage s) : p_(p), s_(s) {}
    template <typename T> T *as(Storage wanted) const {
      if (s_ != wanted) {
        std::fprintf(stderr, "test bug: a buffer passed as the wrong type\n");
        std::abort();
      }
      return reinterpret_cast<T *>(p_);
    }
    unsigned char *p_;
    Storage s_;
  };

  Pointer data() { return at(0); }
  // Element `index` onwards: a section of a packed tensor.
  Pointer at(size_t index) {
    return Pointer(bytes_.data() + (offset_ + index) * width_, storage_);
  }
  Storage storage() const { return storage_; }
  // The values, widened to float.
  std::vector<float> values() const {
    std::vector<float> out(size_);
    for (size_t i = 0; i < size_; ++i)
      out[i] = value(offset_ + i);
    return out;
  }
  bool guardsIntact() const {
    for (size_t i = 0; i < size_ + 2 * kGuard + 1; ++i)
      if ((i < offset_ || i >= offset_ + size_) && get(i) != guardBits())
        return false;
    return true;
  }

private:
  // 16 elements keep data() on the 16 bytes operator new aligns vectors to.
  static constexpr size_t kGuard = 16;
  // A NaN no kernel computes: its bf16 half is a signalling NaN, and every
  // bf16 a kernel stores comes through __float2bfloat16, which quiets NaNs.
  static constexpr uint32_t kGuardPattern = 0x7fbadbadu;
  uint32_t guardBits() const {
    return width_ == 4 ? kGuardPattern : kGuardPattern >> 16;
  }

  uint32_t get(size_t i) const {
    uint32_t bits = 0;
    if (width_ == 4) {
      std::memcpy(&bits, &bytes_[i * 4], 4);
    } else {
      uint16_t half;
      std::memcpy(&half, &bytes_[i * 2], 2);
      bits = half;
    }
    return bits;
  }
  void put(size_t i, uint32_t bits) {
    if (width_ == 4) {
      std::memcpy(&bytes_[i * 4], &bits, 4);
    } else {
      const uint16_t half = static_cast<uint16_t>(bits);
      std::memcpy(&bytes_[i * 2], &half, 2);
    }
  }
  float value(size_t i) const {
    if (width_ == 2)
      return widenBf16(static_cast<uint16_t>(get(i)));
    const uint32_t bits = get(i);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  // A bf16 input must already be a bf16 value (roundToBf16), or the CPU
  // reference would see other numbers than the kernel.
  void setValue(size_t i, float v) {
    if (storage_ == Storage::f32) {
      uint32_t bits;
      std::memcpy(&bits, &v, sizeof bits);
      put(offset_ + i, bits);
      return;
    }
    if (!std::isnan(v) && roundToBf16(v) != v) {
      std::fprintf(stderr, "test bug: %g is not a bf16 value\n", v);
      std::abort();
    }
    put(offset_ + i, narrowBf16(v));
  }

  Storage storage_;
  size_t width_, size_, offset_;
  std::vector<unsigned char> bytes_;
};

// Calls gpu_<name>_bf16 or gpu_<name>_f32 with the same arguments: each
// Buffer converts to the pointer type its argument takes.
#define GPU_CALL(storage, name, ...)                                           \
  ((storage) == Storage::bf16 ? gpu_##name##_bf16(__VA_ARGS__)                 \
                              : gpu_##name##_f32(__VA_ARGS__))

// Bit for bit when tolerance is kExact, else allClose's relative test; the
// tolerance is the f32 kernel's. A bf16 output is the kernel's fp32 result
// rounded once: bit for bit the reference rounded where the f32 kernel is
// exact, else within the f32 tolerance plus u (allClose's rtol bounds
// rtol (|reference| + rms), of which rounding takes u |reference|).
::testing::AssertionResult
matches(const Buffer &gpu, const std::vector<float> &cpu, double tolerance) {
  if (!gpu.guardsIntact())
    return ::testing::AssertionFailure() << "written out of bounds";
  const bool bf16 = gpu.storage() == Storage::bf16;
  const std::vector<float> values = gpu.values();
  if (tolerance != kExact)
    return allClose(values, toDouble(cpu),
                    tolerance + (bf16 ? kBf16Roundoff : 0.0));
  const std::vector<float> expected = bf16 ? roundToBf16(cpu) : cpu;
  for (size_t i = 0; i < expected.size(); ++i)
    if (std::memcmp(&values[i], &expected[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << values[i] << " vs " << expected[i];
  return ::testing::AssertionSuccess();
}

// A fixture over (shape, storage): the f32 cases and, with "_bf16" in their
// names, the same shapes through the _bf16 entry points.
template <typename Shape>
class TypedTest : public ::testing::TestWithParam<std::tuple<Shape, Storage>> {
protected:
  const Shape s = std::get<0>(this->GetParam());
  const Storage storage = std::get<1>(this->GetParam());
  // An input of a tensor that the kernel stores as `storage`: what the CPU
  // reference computes on must be what the kernel reads.
  std::vector<float> typed(std::vector<float> values) const {
    return storage == Storage::bf16 ? roundToBf16(std::move(values)) : values;
  }
  Buffer typedBuffer(const std::vector<float> &values,
                     bool misaligned = false) const {
    return Buffer(values, misaligned, storage);
  }
  Buffer typedGarbage(size_t size, bool misaligned = false) const {
    return Buffer::garbage(size, misaligned, storage);
  }
};

const auto kBothStorages = ::testing::Values(Storage::f32, Storage::bf16);
const auto kF32Only = ::testing::Values(Storage::f32);

// The test name of (shape, storage) from the shape's own name.
template <typename Shape>
auto typedName(std::string (*shapeName)(const Shape &)) {
  return [shapeName](
             const ::testing::TestParamInfo<std::tuple<Shape, Storage>> &info) {
    return shapeName(std::get<0>(info.param)) +
           (std::get<1>(info.param) == Storage::bf16 ? "_bf16" : "");
  };
}

std::vector<int32_t> randomIds(size_t n, int32_t below, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, below - 1);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids)
    id = dist(gen);
  return ids;
}

std::string flags(bool misaligned, bool aliased = false) {
  return std::string(misaligned ? "_misaligned" : "") +
         (aliased ? "_aliased" : "");
}

// --- attention ----------------------------------------------------------

// Tokens of H query heads and KV key/value heads of width D. Packed: rows
// [q (H D) | k (KV D) | v (KV D)] of one buffer, read in place at its row
// stride (GPT-2's fused projection when KV = H); separate: three tensors
// (Llama's projections).
struct AttentionShape {
  int64_t B, T, H, KV, D;
  bool misaligned, separate = false;
  int64_t row() const { return (H + 2 * KV) * D; }
  size_t packed() const { return B * T * row(); }
  size_t out() const { return B * T * H * D; }
  size_t lse() const { return B * H * T; }
  // Where section 0 (q), 1 (k) or 2 (v) starts in a packed row.
  int64_t column(int section) const {
    return section == 0 ? 0 : section == 1 ? H * D : (H + KV) * D;
  }
  int64_t width(int section) const { return (section == 0 ? H : KV) * D; }
};

// Section `section` of packed rows as a compact tensor, and back.
std::vector<float> unpackSection(const AttentionShape &s,
                                 const std::vector<float> &packed,
                                 int section) {
  std::vector<float> out(s.B * s.T * s.width(section));
  for (int64_t r = 0; r < s.B * s.T; ++r)
    std::copy_n(packed.begin() + r * s.row() + s.column(section),
                s.width(section), out.begin() + r * s.width(section));
  return out;
}
std::vector<float> packSections(const AttentionShape &s,
                                const std::vector<float> (&sections)[3]) {
  std::vector<float> packed(s.packed());
  for (int section = 0; section < 3; ++section)
    for (int64_t r = 0; r < s.B * s.T; ++r)
      std::copy_n(sections[section].begin() + r * s.width(section),
                  s.width(section),
                  packed.begin() + r * s.row() + s.column(section));
  return packed;
}

// The device copies of q, k and v (or of their gradients) in the shape's
// layout, and their pointers and row strides as the kernels take them.
class DeviceQKV {
public:
  DeviceQKV(const AttentionShape &s, const std::vector<float> &packed,
            Storage storage, bool garbage = false)
      : s(s) {
    auto make = [&](const std::vector<float> &values) {
      return garbage ? Buffer::garbage(values.size(), s.misaligned, storage)
                     : Buffer(values, s.misaligned, storage);
    };
    if (s.separate)
      for (int section = 0; section < 3; ++section)
        buffers.push_back(make(unpackSection(s, packed, section)));
    else
      buffers.push_back(make(packed));
  }
  Buffer::Pointer section(int i) {
    return s.separate ? buffers[i].data() : buffers[0].at(s.column(i));
  }
  int64_t ldq() const { return s.separate ? s.width(0) : s.row(); }
  int64_t ldkv() const { return s.separate ? s.width(1) : s.row(); }
  bool guardsIntact() const {
    return std::all_of(buffers.begin(), buffers.end(),
                       [](const Buffer &b) { return b.guardsIntact(); });
  }
  // The values in the packed layout.
  Buffer packed() const {
    if (!s.separate)
      return buffers[0];
    std::vector<float> sections[3] = {buffers[0].values(), buffers[1].values(),
                                      buffers[2].values()};
    return Buffer(packSections(s, sections), false, buffers[0].storage());
  }

private:
  AttentionShape s;
  std::vector<Buffer> buffers;
};

// Head sizes that are multiples of 16 take the tensor-core kernels, which
// round every matrix operand (Q, K, V, dO, P, dS) to bf16: unit roundoff
// u = 2^-8. Each product then carries a relative error of up to 2u per term;
// the errors of a sum of terms of both signs largely cancel, and the
// softmax passes a score error e on to an output as about e |v - out|.
// Measured against the fp32 CPU runtime, max |error| / max |reference| is
// 0.9u to 1.4u for out and dqkv on these shapes (the worst element of up to
// 400k); the tolerance is 3u, which a kernel that dropped a term, a tile or
// a rescale (errors of order 1) cannot meet. bf16 storage takes Q, K, V and
// dO as they are and rounds each output once more, by at most u |element|
// <= u max |reference|: 4u (measured: 0.6u to 0.8u, as the operands are no
// longer rounded). The fp32 kernels keep allClose's 1e-5 (plus u for a bf16
// output, as matches says).
constexpr double kBf16Tolerance = 3 * kBf16Roundoff;
// An fp32 kernel agrees with the CPU to about 1e-6 of max |reference|; a
// tensor-core kernel cannot come closer than a fraction of u: the error
// floor that shows the tensor-core path ran.
constexpr double kBf16Floor = kBf16Roundoff / 16;

bool tensorCores(int64_t D) { return D % 16 == 0; }

// max |gpu - cpu| / max |cpu| within [floor, tolerance].
::testing::AssertionResult relativeToMax(const Buffer &gpu,
                                         const std::vector<float> &cpu,
                                         double floor, double tolerance) {
  if (!gpu.guardsIntact())
    return ::testing::AssertionFailure() << "written out of bounds";
  const std::vector<float> values = gpu.values();
  double maxRef = 0.0, maxErr = 0.0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(double(cpu[i])));
    const double err = std::fabs(double(values[i]) - cpu[i]);
    maxErr = std::isnan(err) ? INFINITY : std::max(maxErr, err);
  }
  const double relative = maxErr / maxRef;
  if (relative >= floor && relative <= tolerance)
    return ::testing::AssertionSuccess()
           << "max error / max reference " << relative;
  return ::testing::AssertionFailure()
         << "max error / max reference " << relative << " outside [" << floor
         << ", " << tolerance << "]";
}

// The output check of one attention result for the shape's kernels.
::testing::AssertionResult attentionMatches(const AttentionShape &s,
                                            const Buffer &gpu,
                                            const std::vector<float> &cpu) {
  const double rounded = gpu.storage() == Storage::bf16 ? kBf16Roundoff : 0.0;
  return tensorCores(s.D)
             ? relativeToMax(gpu, cpu, kBf16Floor, kBf16Tolerance + rounded)
             : matches(gpu, cpu, 1e-5);
}

// The attention kernels' probability dropout arguments (attention.h): none
// unless a test sets them.
struct DropoutArgs {
  float rate = 0.0f;
  int64_t seed = 0, step = 0, stream = 0, batchOffset = 0, headOffset = 0,
          globalHeads = 0;
};
#define DROPOUT_ARGS(d)                                                        \
  (d).rate, (d).seed, (d).step, (d).stream, (d).batchOffset, (d).headOffset,  \
      (d).globalHeads

class AttentionTest : public TypedTest<AttentionShape> {
protected:
  std::vector<float> x = typed(randomVector(s.packed(), 1, -2.0f, 2.0f));
  std::vector<float> dout = typed(randomVector(s.out(), 2));
  std::vector<float> out = std::vector<float>(s.out());
  std::vector<float> lse = std::vector<float>(s.lse());
  // x's q, k and v in place (the CPU runtime reads the packed rows).
  const float *q = x.data() + s.column(0), *k = x.data() + s.column(1),
              *v = x.data() + s.column(2);
  DropoutArgs drop;
  void SetUp() override {
    mrt_attention_fwd_f32(q, k, v, s.row(), s.row(), out.data(), lse.data(),
                          s.B, s.T, s.H, s.KV, s.D, DROPOUT_ARGS(drop));
  }
  void checkForward();
  void checkBackward();
  void checkRounding();
};

void AttentionTest::checkForward() {
  DeviceQKV gX(s, x, storage);
  Buffer gOut = typedGarbage(s.out(), s.misaligned),
         gLse = Buffer::garbage(s.lse());
  GPU_CALL(storage, mrt_attention_fwd, gX.section(0), gX.section(1),
           gX.section(2), gX.ldq(), gX.ldkv(), gOut.data(), gLse.data(), s.B,
           s.T, s.H, s.KV, s.D, DROPOUT_ARGS(drop));
  EXPECT_TRUE(gX.guardsIntact());
  EXPECT_TRUE(attentionMatches(s, gOut, out)) << "out";
  // lse = max + log(sum): bf16 scores move it by about u * |score|, more
  // than u relative to max |lse| in rows of small lse, so no floor.
  EXPECT_TRUE(tensorCores(s.D)
                  ? relativeToMax(gLse, lse, 0.0, kBf16Tolerance)
                  : matches(gLse, lse, 1e-5))
      << "lse";
}

void AttentionTest::checkBackward() {
  // The forward's output as the bf16 program would have stored it.
  out = typed(out);
  std::vector<float> dx(s.packed());
  mrt_attention_bwd_f32(q, k, v, s.row(), s.row(), out.data(), dout.data(),
                        lse.data(), dx.data() + s.column(0),
                        dx.data() + s.column(1), dx.data() + s.column(2), s.B,
                        s.T, s.H, s.KV, s.D, DROPOUT_ARGS(drop));
  DeviceQKV gX(s, x, storage), gDx(s, dx, storage, /*garbage=*/true);
  Buffer gOut = typedBuffer(out, s.misaligned),
         gDout = typedBuffer(dout, s.misaligned), gLse(lse);
  GPU_CALL(storage, mrt_attention_bwd, gX.section(0), gX.section(1),
           gX.section(2), gX.ldq(), gX.ldkv(), gOut.data(), gDout.data(),
           gLse.data(), gDx.section(0), gDx.section(1), gDx.section(2), s.B,
           s.T, s.H, s.KV, s.D, DROPOUT_ARGS(drop));
  EXPECT_TRUE(gDx.guardsIntact());
  EXPECT_TRUE(attentionMatches(s, gDx.packed(), dx));
}

TEST_P(AttentionTest, Forward) { checkForward(); }

TEST_P(AttentionTest, Backward) { checkBackward(); }

std::vector<mrt_bf16> asBf16(const std::vector<float> &values) {
  std::vector<mrt_bf16> out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = mrt_bf16_round(values[i]);
  return out;
}

std::vector<float> widened(const std::vector<mrt_bf16> &values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t bits = uint32_t(values[i]) << 16;
    std::memcpy(&out[i], &bits, sizeof(float));
  }
  return out;
}

// sqrt(sum (gpu - cpu)^2 / sum cpu^2): an error spread over many elements,
// where max |error| sees the one element whose rounding flipped.
double rmsRelative(const Buffer &gpu, const std::vector<float> &cpu) {
  const std::vector<float> values = gpu.values();
  double error = 0.0, reference = 0.0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double e = double(values[i]) - cpu[i];
    error += e * e;
    reference += double(cpu[i]) * cpu[i];
  }
  return std::sqrt(error / reference);
}

// The CPU runtime's bf16 attention rounds where the tensor-core kernels
// round (the probabilities before P V; P and the unscaled dS before the
// backward's products), so that the bf16 CPU step is the GPU step's
// reference. Beside it the kernels' results differ only by the order of
// fp32 sums and an exp's last bits (measured: RMS 0 to 0.03u, most
// elements equal), where beside the fp32 kernel on the same bf16 inputs
// they differ by 0.4u to 0.7u RMS: the bound u/16 tells the two apart.
void AttentionTest::checkRounding() {
  constexpr double kSameRounding = kBf16Roundoff / 16;
  const std::vector<mrt_bf16> x16 = asBf16(x), dout16 = asBf16(dout);
  std::vector<mrt_bf16> out16(s.out()), dx16(s.packed());
  std::vector<float> lse16(s.lse());
  mrt_attention_fwd_bf16(x16.data() + s.column(0), x16.data() + s.column(1),
                         x16.data() + s.column(2), s.row(), s.row(),
                         out16.data(), lse16.data(), s.B, s.T, s.H, s.KV, s.D,
                         DROPOUT_ARGS(drop));
  mrt_attention_bwd_bf16(x16.data() + s.column(0), x16.data() + s.column(1),
                         x16.data() + s.column(2), s.row(), s.row(),
                         out16.data(), dout16.data(), lse16.data(),
                         dx16.data() + s.column(0), dx16.data() + s.column(1),
                         dx16.data() + s.column(2), s.B, s.T, s.H, s.KV, s.D,
                         DROPOUT_ARGS(drop));

  DeviceQKV gX(s, x, storage), gDx(s, x, storage, /*garbage=*/true);
  Buffer gOut = typedGarbage(s.out(), s.misaligned),
         gLse = Buffer::garbage(s.lse());
  GPU_CALL(storage, mrt_attention_fwd, gX.section(0), gX.section(1),
           gX.section(2), gX.ldq(), gX.ldkv(), gOut.data(), gLse.data(), s.B,
           s.T, s.H, s.KV, s.D, DROPOUT_ARGS(drop));
  // The backward from the CPU's forward, so that both read the same out.
  Buffer cpuOut = typedBuffer(widened(out16), s.misaligned),
         gDout = typedBuffer(dout, s.misaligned), cpuLse(lse16);
  GPU_CALL(storage, mrt_attention_bwd, gX.section(0), gX.section(1),
           gX.section(2), gX.ldq(), gX.ldkv(), cpuOut.data(), gDout.data(),
           cpuLse.data(), gDx.section(0), gDx.section(1), gDx.section(2), s.B,
           s.T, s.H, s.KV, s.D, DROPOUT_ARGS(drop));
  EXPECT_LE(rmsRelative(gOut, widened(out16)), kSameRounding) << "out";
  EXPECT_LE(rmsRelative(gLse, lse16), kSameRounding) << "lse";
  EXPECT_LE(rmsRelative(gDx.packed(), widened(dx16)), kSameRounding)
      << "dq, dk, dv";
  EXPECT_GT(rmsRelative(gOut, typed(out)), 4 * kSameRounding)
      << "the fp32 kernel's out";
}

class AttentionRoundingTest : public AttentionTest {};

TEST_P(AttentionRoundingTest, Bf16RoundsWhereTheCpuBf16KernelsRound) {
  checkRounding();
}

// Probability dropout on both sides: the kernels draw the CPU's masks for
// the block of the global [B, H, T, T] probabilities the shard holds (the
// second of three sequences, heads 1.. of H + 2), keep the softmax's sums
// those of all probabilities and multiply the kept ones by 1 / (1 - rate)
// before rounding them (tensor cores) for P V; the backward redraws the
// masks: dS = P (F dP - delta), dV = (P F)^T dO.
class AttentionDropoutTest : public AttentionTest {
protected:
  AttentionDropoutTest() {
    drop = {0.25f, 1234567, 3, 9, 1, 1, s.H + 2};
  }
};

TEST_P(AttentionDropoutTest, Forward) { checkForward(); }

TEST_P(AttentionDropoutTest, Backward) { checkBackward(); }

class AttentionDropoutRoundingTest : public AttentionDropoutTest {};

TEST_P(AttentionDropoutRoundingTest, Bf16RoundsWhereTheCpuBf16KernelsRound) {
  checkRounding();
}

// Tiles are 64 rows; the kernels are built for head sizes 64 and 128 with
// the columns past D zero-filled, and copy 16 bytes at a time when D % 4 == 0
// and q, k and v are aligned, 4 otherwise. KV < H: grouped-query attention,
// whose dK and dV sum their query heads' shares.
std::string attentionName(const AttentionShape &s) {
  return "B" + std::to_string(s.B) + "_T" + std::to_string(s.T) + "_H" +
         std::to_string(s.H) + "_KV" + std::to_string(s.KV) + "_D" +
         std::to_string(s.D) + flags(s.misaligned) +
         (s.separate ? "_separate" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Combine(
        ::testing::Values(AttentionShape{2, 150, 3, 3, 20, false},
                          AttentionShape{3, 5, 2, 2, 7, false},
                          AttentionShape{1, 1, 2, 2, 3, false},
                          AttentionShape{1, 130, 2, 2, 64, false},
                          AttentionShape{1, 130, 1, 1, 64, true},
                          AttentionShape{1, 129, 1, 1, 100, false},
                          AttentionShape{1, 70, 1, 1, 128, true},
                          AttentionShape{1, 64, 1, 1, 64, false},
                          AttentionShape{1, 65, 2, 2, 33, false},
                          AttentionShape{1, 200, 1, 1, 72, false},
                          AttentionShape{2, 300, 2, 2, 64, false},
                          AttentionShape{2, 70, 4, 2, 20, false, true},
                          AttentionShape{1, 130, 4, 1, 64, false, true},
                          AttentionShape{2, 65, 6, 2, 64, true},
                          AttentionShape{1, 70, 4, 2, 128, false, true}),
        kBothStorages),
    typedName(attentionName));

// The tensor-core kernels on bf16 storage: both head sizes, grouped
// queries, fused and separate projections, misaligned rows.
INSTANTIATE_TEST_SUITE_P(
    TensorCores, AttentionRoundingTest,
    ::testing::Combine(
        ::testing::Values(AttentionShape{1, 130, 2, 2, 64, false},
                          AttentionShape{1, 70, 1, 1, 128, true},
                          AttentionShape{2, 65, 6, 2, 64, true},
                          AttentionShape{1, 70, 4, 2, 128, false, true}),
        ::testing::Values(Storage::bf16)),
    typedName(attentionName));

// Dropout on both kernel families, both storages.
INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionDropoutTest,
    ::testing::Combine(
        ::testing::Values(AttentionShape{2, 70, 4, 2, 20, false, true},
                          AttentionShape{1, 130, 2, 2, 64, false},
                          AttentionShape{1, 70, 1, 1, 128, true}),
        kBothStorages),
    typedName(attentionName));
INSTANTIATE_TEST_SUITE_P(
    TensorCores, AttentionDropoutRoundingTest,
    ::testing::Combine(
        ::testing::Values(AttentionShape{1, 130, 2, 2, 64, false},
                          AttentionShape{1, 70, 1, 1, 128, true},
                          AttentionShape{2, 65, 6, 2, 64, true},
                          AttentionShape{1, 70, 4, 2, 128, false, true}),
        ::testing::Values(Storage::bf16)),
    typedName(attentionName));

// 16 key tiles: 15 s of emulation, which the bf16 kernels, the same code
// with other loads and stores, need not repeat.
const AttentionShape kLongAttention{1, 1000, 2, 2, 64, false};
INSTANTIATE_TEST_SUITE_P(Long, AttentionTest,
                         ::testing::Combine(::testing::Values(kLongAttention),
                                            kF32Only),
                         typedName(attentionName));

// --- generation: the KV cache ----------------------------------------------

// A chunk of packed rows [q (H D) | k (KV D) | v (KV D)] and caches of KV
// heads.
struct CacheShape {
  int64_t L, B, T, H, KV, D, N;
  int64_t row() const { return (H + 2 * KV) * D; }
  size_t packed() const { return B * T * row(); }
  size_t cache() const { return L * B * KV * N * D; }
  size_t out() const { return B * T * H * D; }
};

// Each sequence's chunk starts at its own position; the last one ends at the
// cache's end.
std::vector<int32_t> chunkPositions(const CacheShape &s) {
  std::vector<int32_t> positions(s.B);
  for (int64_t b = 0; b < s.B; ++b)
    positions[b] = static_cast<int32_t>((s.N - s.T) * b / std::max<int64_t>(s.B - 1, 1));
  return positions;
}

class KVCacheTest : public ::testing::TestWithParam<CacheShape> {
protected:
  const CacheShape s = GetParam();
  std::vector<float> x = randomVector(s.packed(), 41, -2.0f, 2.0f);
  std::vector<float> keys = randomVector(s.cache(), 42);
  std::vector<float> values = randomVector(s.cache(), 43);
  std::vector<int32_t> positions = chunkPositions(s);
  const int64_t layer = s.L - 1;
};

// The keys and the values land where the CPU puts them and nothing else
// changes.
TEST_P(KVCacheTest, Store) {
  for (int64_t column : {s.H * s.D, (s.H + s.KV) * s.D}) {
    std::vector<float> cache = keys;
    Buffer gX(x), gCache(cache);
    mrt_kv_cache_store_f32(x.data() + column, s.row(), cache.data(),
                           positions.data(), layer, s.L, s.B, s.T, s.KV, s.D,
                           s.N);
    gpu_mrt_kv_cache_store_f32(gX.at(column), s.row(), gCache.data(),
                               positions.data(), layer, s.L, s.B, s.T, s.KV,
                               s.D, s.N);
    EXPECT_TRUE(matches(gCache, cache, kExact)) << "column " << column;
  }
}

TEST_P(KVCacheTest, CachedAttention) {
  std::vector<float> out(s.out());
  mrt_attention_cached_f32(x.data(), s.row(), keys.data(), values.data(),
                           positions.data(), out.data(), layer, s.L, s.B, s.T,
                           s.H, s.KV, s.D, s.N);
  Buffer gX(x), gKeys(keys), gValues(values), gOut = Buffer::garbage(s.out());
  gpu_mrt_attention_cached_f32(gX.data(), s.row(), gKeys.data(),
                               gValues.data(), positions.data(), gOut.data(),
                               layer, s.L, s.B, s.T, s.H, s.KV, s.D, s.N);
  EXPECT_TRUE(matches(gOut, out, 1e-5));
}

// Decoding (one token), a prefill chunk, more positions than a block has
// threads, a cache past the 48 KiB of scores a kernel gets unasked, and
// grouped cache heads.
INSTANTIATE_TEST_SUITE_P(
    Shapes, KVCacheTest,
    ::testing::Values(CacheShape{2, 3, 1, 2, 2, 16, 40},
                      CacheShape{1, 2, 7, 3, 3, 20, 30},
                      CacheShape{2, 1, 1, 1, 1, 64, 700},
                      CacheShape{1, 1, 1, 1, 1, 4, 13000},
                      CacheShape{1, 2, 5, 4, 2, 16, 20}),
    [](const auto &info) {
      const CacheShape &s = info.param;
      return "L" + std::to_string(s.L) + "_B" + std::to_string(s.B) + "_T" +
             std::to_string(s.T) + "_H" + std::to_string(s.H) + "_KV" +
             std::to_string(s.KV) + "_D" + std::to_string(s.D) + "_N" +
             std::to_string(s.N);
    });

// A token past the cache's end: the GPU traps (the next CUDA call fails)
// after printing the sequence and position. Device printf writes to stdout,
// which the death test does not see: it goes to stderr here.
void storeAtPosition(int32_t position) {
  std::fflush(stdout);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  const CacheShape s{1, 1, 2, 1, 1, 4, 8};
  std::vector<float> x(s.packed(), 1.0f), cache(s.cache());
  const int32_t positions[] = {position};
  gpu_mrt_kv_cache_store_f32(x.data(), s.row(), cache.data(), positions, 0,
                             s.L, s.B, s.T, s.KV, s.D, s.N);
}

TEST(KVCacheDeathTest, PositionOutsideTheCacheTraps) {
  EXPECT_EXIT(storeAtPosition(7), ::testing::KilledBySignal(SIGABRT),
              "sequence 0's token at position 8 is outside the KV cache of "
              "8 positions");
}

// A wmma call is collective: a warp whose lane 5 skips it, or whose lanes
// pass different arguments, ends the emulator as it would hang or misbehave
// on the GPU.
TEST(WmmaDeathTest, EveryLaneMustMakeTheCall) {
  auto skipLane5 = [] {
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;
    if (threadIdx.x != 5)
      nvcuda::wmma::fill_fragment(f, 0.0f);
  };
  EXPECT_DEATH(emu::launch(emu::LaunchConfig(1, 32), skipLane5),
               "lane 5 of the warp did not make the same call");
  auto divergentValues = [] {
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> f;
    nvcuda::wmma::fill_fragment(f, float(threadIdx.x % 2));
  };
  EXPECT_DEATH(emu::launch(emu::LaunchConfig(1, 32), divergentValues),
               "lanes filled different values");
}

// --- layer norm ---------------------------------------------------------

constexpr float kEps = 1e-5f;

struct Rows {
  int64_t rows, cols;
  bool misaligned, aliased;
  size_t size() const { return rows * cols; }
};

std::string rowsLabel(const Rows &s) {
  return std::to_string(s.rows) + "x" + std::to_string(s.cols) +
         flags(s.misaligned, s.aliased);
}

class LayerNormTest : public TypedTest<Rows> {
protected:
  std::vector<float> x = typed(randomVector(s.size(), 3, -3.0f, 5.0f));
  std::vector<float> w = typed(randomVector(s.cols, 4));
  std::vector<float> b = typed(randomVector(s.cols, 5));
  std::vector<float> y = std::vector<float>(s.size());
  std::vector<float> mean = std::vector<float>(s.rows);
  std::vector<float> rstd = std::vector<float>(s.rows);
  void SetUp() override {
    mrt_layernorm_fwd_f32(x.data(), w.data(), b.data(), y.data(), mean.data(),
                          rstd.data(), s.rows, s.cols, kEps);
  }
};

TEST_P(LayerNormTest, Forward) {
  Buffer gX = typedBuffer(x, s.misaligned), gW = typedBuffer(w, s.misaligned),
         gB = typedBuffer(b), gY = typedGarbage(s.size(), s.misaligned),
         gMean = Buffer::garbage(s.rows), gRstd = Buffer::garbage(s.rows);
  Buffer &result = s.aliased ? gX : gY; // y may alias x
  GPU_CALL(storage, mrt_layernorm_fwd, gX.data(), gW.data(), gB.data(),
           result.data(), gMean.data(), gRstd.data(), s.rows, s.cols, kEps);
  EXPECT_TRUE(matches(result, y, 1e-5)) << "y";
  EXPECT_TRUE(matches(gMean, mean, 1e-5)) << "mean";
  EXPECT_TRUE(matches(gRstd, rstd, 1e-5)) << "rstd";
}

TEST_P(LayerNormTest, Stats) {
  Buffer gX = typedBuffer(x, s.misaligned), gMean = Buffer::garbage(s.rows),
         gRstd = Buffer::garbage(s.rows);
  GPU_CALL(storage, mrt_layernorm_stats, gX.data(), gMean.data(), gRstd.data(),
           s.rows, s.cols, kEps);
  EXPECT_TRUE(matches(gMean, mean, 1e-5)) << "mean";
  EXPECT_TRUE(matches(gRstd, rstd, 1e-5)) << "rstd";
}

TEST_P(LayerNormTest, Backward) {
  const std::vector<float> dy = typed(randomVector(s.size(), 6));
  std::vector<float> dx(s.size()), dw(s.cols), db(s.cols);
  mrt_layernorm_bwd_f32(dy.data(), x.data(), w.data(), mean.data(), rstd.data(),
                        dx.data(), dw.data(), db.data(), s.rows, s.cols);
  Buffer gDy = typedBuffer(dy, s.misaligned), gX = typedBuffer(x, s.misaligned),
         gW = typedBuffer(w, s.misaligned), gMean(mean), gRstd(rstd),
         gDx = typedGarbage(s.size(), s.misaligned),
         gDw = Buffer::garbage(s.cols), gDb = Buffer::garbage(s.cols);
  Buffer &result = s.aliased ? gDy : gDx; // dx may alias dy
  GPU_CALL(storage, mrt_layernorm_bwd, gDy.data(), gX.data(), gW.data(),
           gMean.data(), gRstd.data(), result.data(), gDw.data(), gDb.data(),
           s.rows, s.cols);
  EXPECT_TRUE(matches(result, dx, 1e-5)) << "dx";
  EXPECT_TRUE(matches(gDw, dw, 1e-5)) << "dw";
  EXPECT_TRUE(matches(gDb, db, 1e-5)) << "db";
}

// A warp per row: 64 and 132 columns take the 16-byte path unless
// misaligned, 67 the scalar one, 1000 several sweeps of the warp; 300 rows
// are 38 blocks; no rows leave zero parameter gradients.
INSTANTIATE_TEST_SUITE_P(
    Shapes, LayerNormTest,
    ::testing::Combine(::testing::Values(Rows{37, 64, false, false},
                                         Rows{37, 67, false, true},
                                         Rows{37, 132, true, false},
                                         Rows{300, 132, false, true},
                                         Rows{5, 1000, false, false},
                                         Rows{0, 8, false, false}),
                       kBothStorages),
    typedName(rowsLabel));

class ResidualLayerNormTest : public TypedTest<Rows> {};

TEST_P(ResidualLayerNormTest, Forward) {
  const std::vector<float> x = typed(randomVector(s.size(), 7, -3.0f, 5.0f)),
                           delta = typed(randomVector(s.size(), 8)),
                           bias = typed(randomVector(s.cols, 9)),
                           w = typed(randomVector(s.cols, 10)),
                           b = typed(randomVector(s.cols, 11));
  std::vector<float> sum(s.size()), y(s.size()), mean(s.rows), rstd(s.rows);
  mrt_residual_layernorm_fwd_f32(
      x.data(), delta.data(), bias.data(), sum.data(), w.data(), b.data(),
      y.data(), mean.data(), rstd.data(), s.rows, s.cols, kEps);
  Buffer gX = typedBuffer(x, s.misaligned),
         gDelta = typedBuffer(delta, s.misaligned), gBias = typedBuffer(bias),
         gSum = typedGarbage(s.size(), s.misaligned), gW = typedBuffer(w),
         gB = typedBuffer(b), gY = typedGarbage(s.size(), s.misaligned),
         gMean = Buffer::garbage(s.rows), gRstd = Buffer::garbage(s.rows);
  GPU_CALL(storage, mrt_residual_layernorm_fwd, gX.data(), gDelta.data(),
           gBias.data(), gSum.data(), gW.data(), gB.data(), gY.data(),
           gMean.data(), gRstd.data(), s.rows, s.cols, kEps);
  EXPECT_TRUE(matches(gSum, sum, kExact)) << "sum";
  if (storage == Storage::bf16)
    // The kernel normalises the sum as stored, rounded to bf16: the layer
    // norm of those values is the reference.
    mrt_layernorm_fwd_f32(gSum.values().data(), w.data(), b.data(), y.data(),
                          mean.data(), rstd.data(), s.rows, s.cols, kEps);
  EXPECT_TRUE(matches(gY, y, 1e-5)) << "y";
  EXPECT_TRUE(matches(gMean, mean, 1e-5)) << "mean";
  EXPECT_TRUE(matches(gRstd, rstd, 1e-5)) << "rstd";
}

// sum must not alias y, and nothing else may alias (restrict pointers).
INSTANTIATE_TEST_SUITE_P(
    Shapes, ResidualLayerNormTest,
    ::testing::Combine(::testing::Values(Rows{37, 64, false, false},
                                         Rows{37, 67, false, false},
                                         Rows{37, 132, true, false},
                                         Rows{300, 132, false, false},
                                         Rows{5, 1000, true, false}),
                       kBothStorages),
    typedName(rowsLabel));

// --- RMS norm -----------------------------------------------------------

class RMSNormTest : public TypedTest<Rows> {
protected:
  std::vector<float> x = typed(randomVector(s.size(), 12, -3.0f, 5.0f));
  std::vector<float> w = typed(randomVector(s.cols, 13));
  std::vector<float> y = std::vector<float>(s.size());
  std::vector<float> rstd = std::vector<float>(s.rows);
  void SetUp() override {
    mrt_rmsnorm_fwd_f32(x.data(), w.data(), y.data(), rstd.data(), s.rows,
                        s.cols, kEps);
  }
};

TEST_P(RMSNormTest, Forward) {
  Buffer gX = typedBuffer(x, s.misaligned), gW = typedBuffer(w, s.misaligned),
         gY = typedGarbage(s.size(), s.misaligned),
         gRstd = Buffer::garbage(s.rows);
  Buffer &result = s.aliased ? gX : gY; // y may alias x
  GPU_CALL(storage, mrt_rmsnorm_fwd, gX.data(), gW.data(), result.data(),
           gRstd.data(), s.rows, s.cols, kEps);
  EXPECT_TRUE(matches(result, y, 1e-5)) << "y";
  EXPECT_TRUE(matches(gRstd, rstd, 1e-5)) << "rstd";
}

TEST_P(RMSNormTest, Stats) {
  Buffer gX = typedBuffer(x, s.misaligned), gRstd = Buffer::garbage(s.rows);
  GPU_CALL(storage, mrt_rmsnorm_stats, gX.data(), gRstd.data(), s.rows,
           s.cols, kEps);
  EXPECT_TRUE(matches(gRstd, rstd, 1e-5)) << "rstd";
}

TEST_P(RMSNormTest, Backward) {
  const std::vector<float> dy = typed(randomVector(s.size(), 14));
  std::vector<float> dx(s.size()), dw(s.cols);
  mrt_rmsnorm_bwd_f32(dy.data(), x.data(), w.data(), rstd.data(), dx.data(),
                      dw.data(), s.rows, s.cols);
  Buffer gDy = typedBuffer(dy, s.misaligned), gX = typedBuffer(x, s.misaligned),
         gW = typedBuffer(w, s.misaligned), gRstd(rstd),
         gDx = typedGarbage(s.size(), s.misaligned),
         gDw = Buffer::garbage(s.cols);
  Buffer &result = s.aliased ? gDy : gDx; // dx may alias dy
  GPU_CALL(storage, mrt_rmsnorm_bwd, gDy.data(), gX.data(), gW.data(),
           gRstd.data(), result.data(), gDw.data(), s.rows, s.cols);
  EXPECT_TRUE(matches(result, dx, 1e-5)) << "dx";
  EXPECT_TRUE(matches(gDw, dw, 1e-5)) << "dw";
}

// The layer norm's shapes: vector and scalar paths, several sweeps, no rows.
INSTANTIATE_TEST_SUITE_P(
    Shapes, RMSNormTest,
    ::testing::Combine(::testing::Values(Rows{37, 64, false, false},
                                         Rows{37, 67, false, true},
                                         Rows{37, 132, true, false},
                                         Rows{300, 132, false, true},
                                         Rows{5, 1000, false, false},
                                         Rows{0, 8, false, false}),
                       kBothStorages),
    typedName(rowsLabel));

class ResidualRMSNormTest : public TypedTest<Rows> {};

TEST_P(ResidualRMSNormTest, Forward) {
  const std::vector<float> residual =
                               typed(randomVector(s.size(), 15, -3.0f, 5.0f)),
                           delta = typed(randomVector(s.size(), 16)),
                           w = typed(randomVector(s.cols, 13));
  std::vector<float> sum(s.size()), ys(s.size()), rstds(s.rows);
  mrt_residual_rmsnorm_fwd_f32(residual.data(), delta.data(), sum.data(),
                               w.data(), ys.data(), rstds.data(), s.rows,
                               s.cols, kEps);
  Buffer gX = typedBuffer(residual, s.misaligned),
         gDelta = typedBuffer(delta, s.misaligned),
         gSum = typedGarbage(s.size(), s.misaligned), gW = typedBuffer(w),
         gY = typedGarbage(s.size(), s.misaligned),
         gRstd = Buffer::garbage(s.rows);
  GPU_CALL(storage, mrt_residual_rmsnorm_fwd, gX.data(), gDelta.data(),
           gSum.data(), gW.data(), gY.data(), gRstd.data(), s.rows, s.cols,
           kEps);
  EXPECT_TRUE(matches(gSum, sum, kExact)) << "sum";
  if (storage == Storage::bf16)
    // Normalised as stored, rounded to bf16, as the layer norm's sum.
    mrt_rmsnorm_fwd_f32(gSum.values().data(), w.data(), ys.data(),
                        rstds.data(), s.rows, s.cols, kEps);
  EXPECT_TRUE(matches(gY, ys, 1e-5)) << "y";
  EXPECT_TRUE(matches(gRstd, rstds, 1e-5)) << "rstd";
}

// sum must not alias y, and nothing else may alias (restrict pointers).
INSTANTIATE_TEST_SUITE_P(
    Shapes, ResidualRMSNormTest,
    ::testing::Combine(::testing::Values(Rows{37, 64, false, false},
                                         Rows{37, 67, false, false},
                                         Rows{37, 132, true, false},
                                         Rows{300, 132, false, false},
                                         Rows{5, 1000, true, false}),
                       kBothStorages),
    typedName(rowsLabel));

// --- rotary embeddings --------------------------------------------------

struct RoPEShape {
  int64_t B, T, H, D;
  bool aliased;
  size_t size() const { return B * T * H * D; }
};

std::string ropeLabel(const RoPEShape &s) {
  return std::to_string(s.B) + "x" + std::to_string(s.T) + "x" +
         std::to_string(s.H) + "x" + std::to_string(s.D) +
         flags(false, s.aliased);
}

class RoPETest : public TypedTest<RoPEShape> {};

// Both directions against the CPU kernel, at per-sequence starts far into
// a context (angles of thousands of radians).
TEST_P(RoPETest, BothDirections) {
  const std::vector<float> x = typed(randomVector(s.size(), 17));
  std::vector<int32_t> positions(s.B);
  for (int64_t b = 0; b < s.B; ++b)
    positions[b] = static_cast<int32_t>(b * 4093);
  for (int64_t direction : {1, -1}) {
    std::vector<float> y(s.size());
    mrt_rope_f32(x.data(), positions.data(), y.data(), s.B, s.T, s.H, s.D,
                 500000.0, direction);
    Buffer gX = typedBuffer(x), gY = typedGarbage(s.size());
    Buffer &result = s.aliased ? gX : gY; // y may alias x
    GPU_CALL(storage, mrt_rope, gX.data(), positions.data(), result.data(),
             s.B, s.T, s.H, s.D, 500000.0, direction);
    EXPECT_TRUE(matches(result, y, 1e-6)) << "direction " << direction;
  }
}

// Llama's 128-wide heads, a small odd-sized case, and one sequence.
INSTANTIATE_TEST_SUITE_P(
    Shapes, RoPETest,
    ::testing::Combine(::testing::Values(RoPEShape{2, 5, 3, 8, false},
                                         RoPEShape{3, 7, 2, 128, true},
                                         RoPEShape{1, 33, 4, 6, false}),
                       kBothStorages),
    typedName(ropeLabel));

// --- dropout ------------------------------------------------------------

// A [n0, n1, n2] block of a global [*, g1, g2] tensor at offsets.
struct DropoutShape {
  int64_t n0, n1, n2, o0, o1, o2, g1, g2;
  bool aliased;
  size_t size() const { return n0 * n1 * n2; }
};

std::string dropoutLabel(const DropoutShape &s) {
  return std::to_string(s.n0) + "x" + std::to_string(s.n1) + "x" +
         std::to_string(s.n2) + "_at_" + std::to_string(s.o0) + "_" +
         std::to_string(s.o1) + "_" + std::to_string(s.o2) +
         flags(false, s.aliased);
}

class DropoutTest : public TypedTest<DropoutShape> {};

// The mask bits equal the CPU runtime's (which draws one Philox block per
// four elements of a row, where a GPU thread draws its element's own).
TEST_P(DropoutTest, MaskEqualsTheCPURuntimes) {
  const std::vector<float> x = typed(randomVector(s.size(), 23));
  std::vector<float> y(s.size());
  mrt_dropout_f32(x.data(), y.data(), s.n0, s.n1, s.n2, s.o0, s.o1, s.o2,
                  s.g1, s.g2, 0.3f, 99, 12, 7);
  Buffer gX = typedBuffer(x), gY = typedGarbage(s.size());
  Buffer &result = s.aliased ? gX : gY; // y may alias x
  GPU_CALL(storage, mrt_dropout, gX.data(), result.data(), s.n0, s.n1, s.n2,
           s.o0, s.o1, s.o2, s.g1, s.g2, 0.3f, 99, 12, 7);
  EXPECT_TRUE(matches(result, y, kExact));
}

// Rows whose global indices start off a block of four, and a whole tensor.
INSTANTIATE_TEST_SUITE_P(
    Shapes, DropoutTest,
    ::testing::Combine(
        ::testing::Values(DropoutShape{2, 3, 5, 1, 2, 3, 7, 11, false},
                          DropoutShape{4, 16, 64, 0, 0, 0, 16, 64, true},
                          DropoutShape{1, 1, 1000, 0, 0, 0, 1, 1000, false}),
        kBothStorages),
    typedName(dropoutLabel));

// A rate outside [0, 1) is refused as the CPU runtime refuses it, by the
// tensor kernel and by attention (attention_dropout.h's check).
TEST(DropoutDeathTest, RateOutsideRangeIsFatal) {
  std::vector<float> x(4, 1.0f);
  EXPECT_DEATH(gpu_mrt_dropout_f32(x.data(), x.data(), 1, 1, 4, 0, 0, 0, 1, 4,
                                   1.5f, 0, 0, 0),
               "dropout: rate 1.5 is outside \\[0, 1\\)");
  std::vector<float> qkv(4 * 12, 1.0f), out(4 * 4), lse(4);
  EXPECT_DEATH(gpu_mrt_attention_fwd_f32(qkv.data(), qkv.data() + 4,
                                         qkv.data() + 8, 12, 12, out.data(),
                                         lse.data(), 1, 4, 1, 1, 4, 1.5f, 0, 0,
                                         0, 0, 0, 1),
               "attention: dropout rate 1.5 is outside \\[0, 1\\)");
}


// --- embeddings ---------------------------------------------------------

struct EmbeddingShape {
  int64_t N, Vl, C, vocabStart;
  bool misaligned;
};

class EmbeddingTest : public TypedTest<EmbeddingShape> {
protected:
  // Ids from three ranks' shards, so some are another rank's; the first two
  // repeat one local id, whose gradient rows then add up.
  std::vector<int32_t> ids = [&] {
    std::vector<int32_t> v = randomIds(s.N, 3 * s.Vl, 12);
    v[0] = v[1] = static_cast<int32_t>(s.vocabStart + 2);
    return v;
  }();
};

TEST_P(EmbeddingTest, Forward) {
  const std::vector<float> table = typed(randomVector(s.Vl * s.C, 13));
  std::vector<float> out(s.N * s.C);
  mrt_embedding_fwd_f32(table.data(), ids.data(), s.vocabStart, s.Vl, s.C, s.N,
                        out.data());
  Buffer gTable = typedBuffer(table, s.misaligned),
         gOut = typedGarbage(s.N * s.C, s.misaligned);
  GPU_CALL(storage, mrt_embedding_fwd, gTable.data(), ids.data(), s.vocabStart,
           s.Vl, s.C, s.N, gOut.data());
  EXPECT_TRUE(matches(gOut, out, kExact));
}

// The table's gradient is fp32 for both entry points.
TEST_P(EmbeddingTest, Backward) {
  const std::vector<float> dout = typed(randomVector(s.N * s.C, 14));
  std::vector<float> dtable = randomVector(s.Vl * s.C, 15); // accumulates
  Buffer gDout = typedBuffer(dout, s.misaligned), gDtable(dtable, s.misaligned);
  mrt_embedding_bwd_f32(dout.data(), ids.data(), s.vocabStart, s.Vl, s.C, s.N,
                        dtable.data());
  GPU_CALL(storage, mrt_embedding_bwd, gDout.data(), ids.data(), s.vocabStart,
           s.Vl, s.C, s.N, gDtable.data());
  EXPECT_TRUE(matches(gDtable, dtable, 1e-6)); // atomics: any order
}

// The second and third shards of a vocabulary of 33; C = 9 takes the scalar
// path.
const auto kEmbeddingShapes = ::testing::Values(
    EmbeddingShape{15, 11, 8, 11, false}, EmbeddingShape{15, 11, 9, 0, false},
    EmbeddingShape{15, 11, 8, 22, true});

std::string embeddingName(const EmbeddingShape &s) {
  return "N" + std::to_string(s.N) + "_Vl" + std::to_string(s.Vl) + "_C" +
         std::to_string(s.C) + "_start" + std::to_string(s.vocabStart) +
         flags(s.misaligned);
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingTest,
                         ::testing::Combine(kEmbeddingShapes, kBothStorages),
                         typedName(embeddingName));

// --- vocabulary-parallel cross-entropy ----------------------------------

struct VocabShard {
  int64_t N, Vl, vocabStart, validVocab;
  bool misaligned, aliased;
};

class CrossEntropyTest : public TypedTest<VocabShard> {
protected:
  std::vector<float> logits = typed(randomVector(s.N * s.Vl, 24, -5.0f, 5.0f));
  // The all-reduced maximum and sum of other ranks stand in as constants.
  std::vector<float> gmax = randomVector(s.N, 25, 4.0f, 6.0f);
  std::vector<int32_t> targets = [&] {
    std::vector<int32_t> t = randomIds(s.N, s.validVocab, 26);
    if (s.vocabStart + 1 < s.validVocab)
      t[0] = static_cast<int32_t>(s.vocabStart + 1); // at least one local
    return t;
  }();
};

TEST_P(CrossEntropyTest, LocalMax) {
  std::vector<float> max(s.N);
  mrt_vocab_ce_local_max_f32(logits.data(), s.N, s.Vl, s.vocabStart,
                             s.validVocab, max.data());
  Buffer gLogits = typedBuffer(logits, s.misaligned),
         gMax = Buffer::garbage(s.N);
  GPU_CALL(storage, mrt_vocab_ce_local_max, gLogits.data(), s.N, s.Vl,
           s.vocabStart, s.validVocab, gMax.data());
  EXPECT_TRUE(matches(gMax, max, kExact));
}

TEST_P(CrossEntropyTest, LocalSumExp) {
  std::vector<float> sumexp(s.N), tlogit(s.N);
  mrt_vocab_ce_local_sumexp_f32(logits.data(), targets.data(), s.N, s.Vl,
                                s.vocabStart, s.validVocab, gmax.data(),
                                sumexp.data(), tlogit.data());
  Buffer gLogits = typedBuffer(logits, s.misaligned), gGmax(gmax),
         gSumexp = Buffer::garbage(s.N), gTlogit = Buffer::garbage(s.N);
  GPU_CALL(storage, mrt_vocab_ce_local_sumexp, gLogits.data(), targets.data(),
           s.N, s.Vl, s.vocabStart, s.validVocab, gGmax.data(), gSumexp.data(),
           gTlogit.data());
  EXPECT_TRUE(matches(gSumexp, sumexp, 1e-6)) << "sumexp";
  EXPECT_TRUE(matches(gTlogit, tlogit, kExact)) << "tlogit";
}

// mrt_vocab_ce_loss_f32 serves both precisions: it reads only statistics.
class CrossEntropyLossTest : public CrossEntropyTest {};

TEST_P(CrossEntropyLossTest, Loss) {
  const std::vector<float> sumexp = randomVector(s.N, 27, 1.0f, 3.0f),
                           tlogit = randomVector(s.N, 28);
  const float loss =
      mrt_vocab_ce_loss_f32(gmax.data(), sumexp.data(), tlogit.data(), s.N);
  Buffer gGmax(gmax), gSumexp(sumexp), gTlogit(tlogit);
  EXPECT_TRUE(
      relativelyClose(gpu_mrt_vocab_ce_loss_f32(gGmax.data(), gSumexp.data(),
                                                gTlogit.data(), s.N),
                      loss, 1e-6));
}

TEST_P(CrossEntropyTest, Backward) {
  const std::vector<float> sumexp = randomVector(s.N, 29, 1.0f, 3.0f);
  std::vector<float> dlogits(s.N * s.Vl);
  mrt_vocab_ce_bwd_f32(logits.data(), targets.data(), gmax.data(),
                       sumexp.data(), s.N, s.Vl, s.vocabStart, s.validVocab,
                       0.7f, dlogits.data());
  Buffer gLogits = typedBuffer(logits, s.misaligned), gGmax(gmax),
         gSumexp(sumexp), gDlogits = typedGarbage(s.N * s.Vl, s.misaligned);
  Buffer &result = s.aliased ? gLogits : gDlogits;
  GPU_CALL(storage, mrt_vocab_ce_bwd, gLogits.data(), targets.data(),
           gGmax.data(), gSumexp.data(), s.N, s.Vl, s.vocabStart, s.validVocab,
           0.7f, result.data());
  EXPECT_TRUE(matches(result, dlogits, 1e-5));
}

// Shards of a vocabulary of 75: the second with padding past 75, the first,
// one of 41 columns (scalar path), a large one, and one holding only
// padding (its maximum is -inf, its sum 0).
const auto kVocabShards =
    ::testing::Values(VocabShard{13, 40, 40, 75, false, false},
                      VocabShard{13, 40, 40, 75, false, true},
                      VocabShard{13, 41, 0, 75, false, false},
                      VocabShard{13, 40, 0, 75, true, true},
                      VocabShard{13, 1200, 1200, 2300, false, false},
                      VocabShard{13, 40, 80, 75, false, false});

std::string shardName(const VocabShard &s) {
  return "N" + std::to_string(s.N) + "_Vl" + std::to_string(s.Vl) + "_start" +
         std::to_string(s.vocabStart) + "_valid" +
         std::to_string(s.validVocab) + flags(s.misaligned, s.aliased);
}

INSTANTIATE_TEST_SUITE_P(Shards, CrossEntropyTest,
                         ::testing::Combine(kVocabShards, kBothStorages),
                         typedName(shardName));
INSTANTIATE_TEST_SUITE_P(Shards, CrossEntropyLossTest,
                         ::testing::Combine(kVocabShards, kF32Only),
                         typedName(shardName));

// The kernel records a target outside the vocabulary; the loss, which
// reads the result back anyway, ends the process as the CPU runtime does.
void lossWithTarget(int32_t target) {
  const std::vector<float> logits = randomVector(2 * 40, 30), gmax(2, 1.0f);
  const std::vector<int32_t> targets = {3, target};
  std::vector<float> sumexp(2), tlogit(2);
  gpu_mrt_vocab_ce_local_sumexp_f32(logits.data(), targets.data(), 2, 40, 0, 75,
                                    gmax.data(), sumexp.data(), tlogit.data());
  gpu_mrt_vocab_ce_loss_f32(gmax.data(), sumexp.data(), tlogit.data(), 2);
}

TEST(CrossEntropyDeathTest, LossReportsBadTarget) {
  EXPECT_DEATH(lossWithTarget(80),
               "cross-entropy target 80 outside the vocabulary \\[0, 75\\)");
}

// --- optimizer ----------------------------------------------------------

struct Elements {
  int64_t n;
  bool misaligned;
};

class OptimizerTest : public ::testing::TestWithParam<Elements> {
protected:
  const Elements s = GetParam();
  std::vector<float> p = randomVector(s.n, 31);
};

// Each tensor's sum lands in its slot; one read gives the total in slot
// order.
TEST_P(OptimizerTest, SumSquares) {
  Buffer gP(p, s.misaligned);
  std::vector<double> sums = {-1.0, -1.0, -1.0}, gpuSums = {5.0, -1.0, 7.0};
  mrt_sum_squares_f32(p.data(), s.n, sums.data(), 1);
  gpu_mrt_sum_squares_f32(gP.data(), s.n, gpuSums.data(), 1);
  EXPECT_TRUE(relativelyClose(gpuSums[1], sums[1], 1e-12));
  EXPECT_EQ(gpuSums[0], 5.0);
  EXPECT_EQ(gpuSums[2], 7.0);
  EXPECT_EQ(gpu_mrt_sum_f64(gpuSums.data(), 3), 5.0 + gpuSums[1] + 7.0);
  EXPECT_TRUE(gP.guardsIntact());
}

// 300001 elements fill the 1024-block grid of the scalar path, so its
// grid-stride loops go round more than once.
INSTANTIATE_TEST_SUITE_P(
    Sizes, OptimizerTest,
    ::testing::Values(Elements{1003, false}, Elements{1003, true},
                      Elements{100003, false}, Elements{300001, true}),
    [](const auto &info) {
      return "n" + std::to_string(info.param.n) + flags(info.param.misaligned);
    });

// --- sums over rows -----------------------------------------------------

class SumRowsTest : public TypedTest<Rows> {};

// The sums are fp32 for both entry points.
TEST_P(SumRowsTest, MatchesCpu) {
  const std::vector<float> x = typed(randomVector(s.size(), 35));
  std::vector<float> out(s.cols);
  mrt_sum_rows_f32(x.data(), s.rows, s.cols, out.data());
  Buffer gX = typedBuffer(x, s.misaligned), gOut = Buffer::garbage(s.cols);
  GPU_CALL(storage, mrt_sum_rows, gX.data(), s.rows, s.cols, gOut.data());
  EXPECT_TRUE(matches(gOut, out, 1e-6));
}

// Row chunks of at least 32 rows: 1000 rows of 8 columns are 32 chunks; no
// rows at all is zeros.
INSTANTIATE_TEST_SUITE_P(
    Shapes, SumRowsTest,
    ::testing::Combine(::testing::Values(Rows{1, 1, false, false},
                                         Rows{37, 67, false, false},
                                         Rows{300, 132, true, false},
                                         Rows{1000, 8, false, false},
                                         Rows{0, 5, false, false}),
                       kBothStorages),
    typedName(rowsLabel));

// A kernel file that adds an entry point fails here until the entry point
// is compared with the CPU runtime above.
TEST(EntryPoints, EveryOneIsTested) {
  const std::set<std::string> tested = {"mrt_attention_fwd_f32",
                                        "mrt_attention_bwd_f32",
                                        "mrt_kv_cache_store_f32",
                                        "mrt_attention_cached_f32",
                                        "mrt_layernorm_fwd_f32",
                                        "mrt_layernorm_stats_f32",
                                        "mrt_layernorm_bwd_f32",
                                        "mrt_residual_layernorm_fwd_f32",
                                        "mrt_rmsnorm_fwd_f32",
                                        "mrt_rmsnorm_stats_f32",
                                        "mrt_rmsnorm_bwd_f32",
                                        "mrt_residual_rmsnorm_fwd_f32",
                                        "mrt_rope_f32",
                                        "mrt_dropout_f32",
                                        "mrt_embedding_fwd_f32",
                                        "mrt_embedding_bwd_f32",
                                        "mrt_vocab_ce_local_max_f32",
                                        "mrt_vocab_ce_local_sumexp_f32",
                                        "mrt_vocab_ce_loss_f32",
                                        "mrt_vocab_ce_bwd_f32",
                                        "mrt_sum_squares_f32",
                                        "mrt_sum_f64",
                                        "mrt_sum_rows_f32",
                                        "mrt_attention_fwd_bf16",
                                        "mrt_attention_bwd_bf16",
                                        "mrt_layernorm_fwd_bf16",
                                        "mrt_layernorm_stats_bf16",
                                        "mrt_layernorm_bwd_bf16",
                                        "mrt_residual_layernorm_fwd_bf16",
                                        "mrt_rmsnorm_fwd_bf16",
                                        "mrt_rmsnorm_stats_bf16",
                                        "mrt_rmsnorm_bwd_bf16",
                                        "mrt_residual_rmsnorm_fwd_bf16",
                                        "mrt_rope_bf16",
                                        "mrt_dropout_bf16",
                                        "mrt_embedding_fwd_bf16",
                                        "mrt_embedding_bwd_bf16",
                                        "mrt_vocab_ce_local_max_bf16",
                                        "mrt_vocab_ce_local_sumexp_bf16",
                                        "mrt_vocab_ce_bwd_bf16",
                                        "mrt_sum_rows_bf16"};
  std::set<std::string> defined;
#define INSERT_NAME(name) defined.insert(#name);
  MEGATRON_RT_GPU_ENTRY_POINTS(INSERT_NAME)
  EXPECT_EQ(defined, tested);
}

} // namespace
