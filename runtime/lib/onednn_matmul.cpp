#include "onednn_matmul.h"

#include "fatal.h"

#include <dnnl.hpp>
#include <omp.h>

#include <map>
#include <mutex>
#include <unordered_map>

namespace mrt {
namespace {

using dnnl::memory;

memory::data_type dataType(GemmType type) {
  return type == GemmType::BF16 ? memory::data_type::bf16
                                : memory::data_type::f32;
}

/// op(X) as a [rows, cols] oneDNN matrix over row-major storage with
/// leading dimension ld: transposed storage is the same matrix with its
/// strides swapped, so no copy is made.
memory::desc matrix(int64_t rows, int64_t cols, int64_t ld, bool transposed,
                    GemmType type) {
  memory::dims strides = transposed ? memory::dims{1, ld} : memory::dims{ld, 1};
  return memory::desc({rows, cols}, dataType(type), strides);
}

dnnl::engine &cpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::matmul::primitive_desc describe(const MatmulProblem &p) {
  const memory::desc a = matrix(p.M, p.K, p.lda, p.transA, p.operands),
                     b = matrix(p.K, p.N, p.ldb, p.transB, p.operands),
                     c = matrix(p.M, p.N, p.ldc, false, p.result);
  dnnl::primitive_attr attr;
  if (p.alpha != 1.0f)
    attr.set_output_scales(0, {p.alpha});
  if (p.beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(p.beta);
    attr.set_post_ops(ops);
  }
  if (!p.bias)
    return {dnnl::matmul::desc(a, b, c), attr, cpuEngine()};
  const memory::desc bias({1, p.N}, dataType(p.operands), memory::dims{p.N, 1});
  return {dnnl::matmul::desc(a, b, bias, c), attr, cpuEngine()};
}

struct BuiltMatmul {
  explicit BuiltMatmul(dnnl::matmul::primitive_desc pd)
      : pd(pd), primitive(pd) {}
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
};

/// The primitives built so far, one per problem and thread count: a
/// primitive splits its work for the OpenMP threads there were when it was
/// built, and would run on that many after omp_set_num_threads changed it.
class MatmulCache {
public:
  const BuiltMatmul &get(const MatmulProblem &p) {
    const std::pair<MatmulProblem, int> key(p, omp_get_max_threads());
    std::lock_guard<std::mutex> lock(mutex);
    auto it = primitives.find(key);
    if (it == primitives.end())
      it = primitives.emplace(key, BuiltMatmul(describe(p))).first;
    return it->second;
  }

private:
  std::mutex mutex;
  std::map<std::pair<MatmulProblem, int>, BuiltMatmul> primitives;
};

MatmulCache &matmulCache() {
  static MatmulCache cache;
  return cache;
}

const char *isaName(dnnl::cpu_isa isa) {
  switch (isa) {
  case dnnl::cpu_isa::sse41:
    return "sse41";
  case dnnl::cpu_isa::avx:
    return "avx";
  case dnnl::cpu_isa::avx2:
    return "avx2";
  case dnnl::cpu_isa::avx2_vnni:
    return "avx2_vnni";
  case dnnl::cpu_isa::avx512_core:
    return "avx512_core";
  case dnnl::cpu_isa::avx512_core_vnni:
    return "avx512_core_vnni";
  case dnnl::cpu_isa::avx512_core_bf16:
    return "avx512_core_bf16";
  case dnnl::cpu_isa::avx512_core_amx:
    return "avx512_core_amx";
  default:
    return "another";
  }
}

Bf16MatmulSupport probeBf16Matmul() {
  Bf16MatmulSupport support;
  MatmulProblem probe;
  probe.M = probe.N = probe.K = probe.lda = probe.ldb = probe.ldc = 64;
  try {
    support.kernel = describe(probe).impl_info_str();
  } catch (const dnnl::error &) {
    const dnnl_version_t *v = dnnl_version();
    support.reason =
        "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) +
        " has no bf16 matmul on this CPU's instruction set (" +
        isaName(dnnl::get_effective_cpu_isa()) +
        "): it needs avx512_core, and AVX-512-BF16 or AMX-BF16 to run at the "
        "bf16 rate";
  }
  return support;
}

} // namespace

bool Bf16MatmulSupport::matrixUnits() const {
  return kernel.find("amx") != std::string::npos;
}

bool Bf16MatmulSupport::nativeBf16() const {
  return matrixUnits() || kernel.find("bf16") != std::string::npos;
}

const Bf16MatmulSupport &bf16MatmulSupport() {
  static const Bf16MatmulSupport support = probeBf16Matmul();
  return support;
}

void oneDNNMatmul(const MatmulProblem &p, const void *A, const void *B,
                  const void *bias, void *C) {
  try {
    const BuiltMatmul &built = matmulCache().get(p);
    const dnnl::matmul::primitive_desc &pd = built.pd;
    dnnl::engine &engine = cpuEngine();
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, memory(pd.src_desc(), engine, const_cast<void *>(A))},
        {DNNL_ARG_WEIGHTS,
         memory(pd.weights_desc(), engine, const_cast<void *>(B))},
        {DNNL_ARG_DST, memory(pd.dst_desc(), engine, C)}};
    if (p.bias)
      args.emplace(DNNL_ARG_BIAS,
                   memory(pd.bias_desc(), engine, const_cast<void *>(bias)));
    thread_local dnnl::stream stream(engine);
    built.primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error &e) {
    fatal("oneDNN matmul of [%lld x %lld] x [%lld x %lld] (%s operands, "
          "%s result) failed: %s",
          static_cast<long long>(p.M), static_cast<long long>(p.K),
          static_cast<long long>(p.K), static_cast<long long>(p.N),
          p.operands == GemmType::BF16 ? "bf16" : "f32",
          p.result == GemmType::BF16 ? "bf16" : "f32", e.what());
  }
}

} // namespace mrt
