// The GEMM entry points on the GPU through cuBLASLt, one code path for all:
// a plan per shape, data types and epilogue (none, the bias, or the bias
// and GELU with or without GELU's input kept).
//
// fp32 buffers (the step's manifest, checkpoints and master weights) run on
// bf16 tensor cores with fp32 accumulation (CUBLAS_COMPUTE_32F_FAST_16BF)
// unless MEGATRON_CUDA_MATMUL asks for "tf32" or "fp32", which the
// correctness check uses to tell rounding from bugs. bf16 operands are
// already what the tensor cores take: CUBLAS_COMPUTE_32F, whatever the
// variable says.
#include "megatron_rt/gemm.h"

#include "cuda_check.h"

#include <cublasLt.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace {

void checkCublas(cublasStatus_t status, const char *what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    mrt::fatal("cuBLASLt %s failed with status %d", what,
               static_cast<int>(status));
}

cublasComputeType_t computeTypeFromEnvironment() {
  const char *mode = std::getenv("MEGATRON_CUDA_MATMUL");
  if (!mode || std::strcmp(mode, "bf16") == 0)
    return CUBLAS_COMPUTE_32F_FAST_16BF;
  if (std::strcmp(mode, "tf32") == 0)
    return CUBLAS_COMPUTE_32F_FAST_TF32;
  if (std::strcmp(mode, "fp32") == 0)
    return CUBLAS_COMPUTE_32F;
  mrt::fatal("MEGATRON_CUDA_MATMUL=%s: expected bf16, tf32 or fp32", mode);
}

/// cuBLASLt is column-major; a row-major C = op(A) op(B) is the
/// column-major C^T = op(B)^T op(A)^T, so B plays cuBLAS's A.
struct Shape {
  int transA, transB;
  int64_t m, n, k, lda, ldb, ldc;
  // The operands' common alignment in bytes (at most 256): the heuristic
  // may otherwise pick a kernel that assumes cudaMalloc's 256.
  uint32_t alignment;
  // A and B share a type; C may differ (bf16 products into fp32 gradients).
  cudaDataType_t abType, cType;
  cublasLtEpilogue_t epilogue;
  bool operator<(const Shape &other) const {
    return std::tie(transA, transB, m, n, k, lda, ldb, ldc, alignment, abType,
                    cType, epilogue) <
           std::tie(other.transA, other.transB, other.m, other.n, other.k,
                    other.lda, other.ldb, other.ldc, other.alignment,
                    other.abType, other.cType, other.epilogue);
  }
};

/// What the GEMM's epilogue adds: a [N] bias of C's type, then GELU, whose
/// input (`aux`, laid out as C) it may keep for the backward pass.
struct Epilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  void *aux = nullptr;
};

Epilogue biasEpilogue(const void *bias) {
  return {CUBLASLT_EPILOGUE_BIAS, bias, nullptr};
}

Epilogue biasGeluEpilogue(const void *bias, void *pre) {
  return {pre ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS,
          bias, pre};
}

uint32_t commonAlignment(const void *a, const void *b, const void *c,
                         const Epilogue &epilogue) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(a) |
                   reinterpret_cast<uintptr_t>(b) |
                   reinterpret_cast<uintptr_t>(c) |
                   reinterpret_cast<uintptr_t>(epilogue.bias) |
                   reinterpret_cast<uintptr_t>(epilogue.aux) | 256;
  return static_cast<uint32_t>(bits & (~bits + 1)); // the lowest set bit
}

/// Descriptors and the chosen algorithm of one GEMM shape, made once: a
/// training step repeats the same few dozen shapes every iteration.
struct Plan {
  cublasLtMatmulDesc_t operation;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algorithm;
};

class Gemm {
public:
  Gemm() : fp32Compute(computeTypeFromEnvironment()) {
    checkCublas(cublasLtCreate(&handle), "cublasLtCreate");
    MRT_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
  }

  void run(const Shape &shape, float alpha, const void *A, const void *B,
           float beta, void *C, const Epilogue &epilogue) {
    std::lock_guard<std::mutex> lock(mutex);
    const Plan &plan = planFor(shape);
    // The pointers are read when the GEMM is enqueued: setting them on the
    // shape's shared descriptor under the lock is safe.
    if (epilogue.bias)
      checkCublas(cublasLtMatmulDescSetAttribute(
                      plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                      &epilogue.bias, sizeof(epilogue.bias)),
                  "setting the bias");
    if (epilogue.aux)
      checkCublas(cublasLtMatmulDescSetAttribute(
                      plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                      &epilogue.aux, sizeof(epilogue.aux)),
                  "setting GELU's input");
    // Column-major view: cuBLAS's first operand is the row-major B.
    checkCublas(cublasLtMatmul(handle, plan.operation, &alpha, B, plan.a, A,
                               plan.b, &beta, C, plan.c, C, plan.c,
                               &plan.algorithm, workspace, kWorkspaceBytes,
                               mrt::cuda::computeStream()),
                "cublasLtMatmul");
  }

private:
  static constexpr size_t kWorkspaceBytes = 32u << 20;

  cublasComputeType_t computeFor(const Shape &s) const {
    return s.abType == CUDA_R_32F ? fp32Compute : CUBLAS_COMPUTE_32F;
  }

  const Plan &planFor(const Shape &s) {
    auto found = plans.find(s);
    if (found != plans.end())
      return found->second;
    Plan plan;
    // alpha and beta stay fp32 scalars whatever the operands.
    checkCublas(cublasLtMatmulDescCreate(&plan.operation, computeFor(s),
                                         CUDA_R_32F),
                "creating a matmul descriptor");
    if (s.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      // Column-major D is C^T: its rows are C's columns, which the [N]
      // bias runs along. The bias and GELU's kept input default to D's
      // type; the input is laid out as D.
      checkCublas(cublasLtMatmulDescSetAttribute(
                      plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE,
                      &s.epilogue, sizeof(s.epilogue)),
                  "setting the epilogue");
      if (s.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
        checkCublas(cublasLtMatmulDescSetAttribute(
                        plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                        &s.ldc, sizeof(s.ldc)),
                    "setting the leading dimension of GELU's input");
    }
    cublasOperation_t opFirst = s.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opSecond = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    checkCublas(cublasLtMatmulDescSetAttribute(plan.operation,
                                               CUBLASLT_MATMUL_DESC_TRANSA,
                                               &opFirst, sizeof(opFirst)),
                "setting TRANSA");
    checkCublas(cublasLtMatmulDescSetAttribute(plan.operation,
                                               CUBLASLT_MATMUL_DESC_TRANSB,
                                               &opSecond, sizeof(opSecond)),
                "setting TRANSB");
    // Row-major extents of the stored B and A; a row-major X[r, c] with
    // leading dimension ld is the column-major c x r matrix X^T.
    int64_t rowsFirst = s.transB ? s.n : s.k, colsFirst = s.transB ? s.k : s.n;
    int64_t rowsSecond = s.transA ? s.k : s.m,
            colsSecond = s.transA ? s.m : s.k;
    checkCublas(cublasLtMatrixLayoutCreate(&plan.a, s.abType, colsFirst,
                                           rowsFirst, s.ldb),
                "creating the layout of B");
    checkCublas(cublasLtMatrixLayoutCreate(&plan.b, s.abType, colsSecond,
                                           rowsSecond, s.lda),
                "creating the layout of A");
    checkCublas(cublasLtMatrixLayoutCreate(&plan.c, s.cType, s.n, s.m, s.ldc),
                "creating the layout of C");
    cublasLtMatmulPreference_t preference;
    checkCublas(cublasLtMatmulPreferenceCreate(&preference),
                "creating a preference");
    size_t workspaceBytes = kWorkspaceBytes;
    checkCublas(cublasLtMatmulPreferenceSetAttribute(
                    preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    &workspaceBytes, sizeof(workspaceBytes)),
                "setting the workspace size");
    for (cublasLtMatmulPreferenceAttributes_t attribute :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      checkCublas(cublasLtMatmulPreferenceSetAttribute(
                      preference, attribute, &s.alignment, sizeof(s.alignment)),
                  "setting the operands' alignment");
    cublasLtMatmulHeuristicResult_t heuristic;
    int found_count = 0;
    checkCublas(cublasLtMatmulAlgoGetHeuristic(handle, plan.operation, plan.a,
                                               plan.b, plan.c, plan.c,
                                               preference, 1, &heuristic,
                                               &found_count),
                "choosing an algorithm");
    cublasLtMatmulPreferenceDestroy(preference);
    if (found_count == 0)
      mrt::fatal("cuBLASLt has no algorithm for a %lld x %lld x %lld GEMM "
                 "(data types %d/%d, epilogue %d, alignment %u)",
                 static_cast<long long>(s.m), static_cast<long long>(s.n),
                 static_cast<long long>(s.k), static_cast<int>(s.abType),
                 static_cast<int>(s.cType), static_cast<int>(s.epilogue),
                 s.alignment);
    plan.algorithm = heuristic.algo;
    return plans.emplace(s, plan).first->second;
  }

  cublasComputeType_t fp32Compute;
  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  std::mutex mutex;
  std::map<Shape, Plan> plans;
};

Gemm &gemm() {
  static auto *instance = new Gemm; // lives until exit, as its GPU memory
  return *instance;
}

// The entry points: the same row-major GEMM on operands of the given
// types, with the given epilogue.
void gemmEntry(const char *name, int transA, int transB, int64_t M, int64_t N,
               int64_t K, float alpha, const void *A, int64_t lda,
               const void *B, int64_t ldb, float beta, void *C, int64_t ldc,
               cudaDataType_t abType, cudaDataType_t cType,
               const Epilogue &epilogue = {}) {
  if (M == 0 || N == 0)
    return;
  if (K == 0)
    // An empty product: C = beta * C, which no step of ours asks for.
    mrt::fatal("%s with K = 0 is not supported on the GPU", name);
  if (epilogue.aux && ldc % 8 != 0)
    mrt::fatal("%s: ldc %lld is not a multiple of 8, as cuBLASLt needs for "
               "GELU's kept input",
               name, static_cast<long long>(ldc));
  gemm().run({transA != 0, transB != 0, M, N, K, lda, ldb, ldc,
              commonAlignment(A, B, C, epilogue), abType, cType,
              epilogue.kind},
             alpha, A, B, beta, C, epilogue);
}

} // namespace

extern "C" void mrt_gemm_f32(int transA, int transB, int64_t M, int64_t N,
                             int64_t K, float alpha, const float *A,
                             int64_t lda, const float *B, int64_t ldb,
                             float beta, float *C, int64_t ldc) {
  gemmEntry("mrt_gemm_f32", transA, transB, M, N, K, alpha, A, lda, B, ldb,
            beta, C, ldc, CUDA_R_32F, CUDA_R_32F);
}

extern "C" void mrt_gemm_bf16(int transA, int transB, int64_t M, int64_t N,
                              int64_t K, float alpha, const mrt_bf16 *A,
                              int64_t lda, const mrt_bf16 *B, int64_t ldb,
                              float beta, mrt_bf16 *C, int64_t ldc) {
  gemmEntry("mrt_gemm_bf16", transA, transB, M, N, K, alpha, A, lda, B, ldb,
            beta, C, ldc, CUDA_R_16BF, CUDA_R_16BF);
}

extern "C" void mrt_gemm_bias_f32(int transA, int transB, int64_t M, int64_t N,
                                  int64_t K, const float *A, int64_t lda,
                                  const float *B, int64_t ldb,
                                  const float *bias, float *C, int64_t ldc) {
  gemmEntry("mrt_gemm_bias_f32", transA, transB, M, N, K, 1.0f, A, lda, B, ldb,
            0.0f, C, ldc, CUDA_R_32F, CUDA_R_32F, biasEpilogue(bias));
}

extern "C" void mrt_gemm_bias_bf16(int transA, int transB, int64_t M,
                                   int64_t N, int64_t K, const mrt_bf16 *A,
                                   int64_t lda, const mrt_bf16 *B, int64_t ldb,
                                   const mrt_bf16 *bias, mrt_bf16 *C,
                                   int64_t ldc) {
  gemmEntry("mrt_gemm_bias_bf16", transA, transB, M, N, K, 1.0f, A, lda, B,
            ldb, 0.0f, C, ldc, CUDA_R_16BF, CUDA_R_16BF, biasEpilogue(bias));
}

extern "C" void mrt_gemm_bias_gelu_f32(int transA, int transB, int64_t M,
                                       int64_t N, int64_t K, const float *A,
                                       int64_t lda, const float *B,
                                       int64_t ldb, const float *bias,
                                       float *pre, float *out, int64_t ldc) {
  gemmEntry("mrt_gemm_bias_gelu_f32", transA, transB, M, N, K, 1.0f, A, lda, B,
            ldb, 0.0f, out, ldc, CUDA_R_32F, CUDA_R_32F,
            biasGeluEpilogue(bias, pre));
}

extern "C" void mrt_gemm_bias_gelu_bf16(int transA, int transB, int64_t M,
                                        int64_t N, int64_t K,
                                        const mrt_bf16 *A, int64_t lda,
                                        const mrt_bf16 *B, int64_t ldb,
                                        const mrt_bf16 *bias, mrt_bf16 *pre,
                                        mrt_bf16 *out, int64_t ldc) {
  gemmEntry("mrt_gemm_bias_gelu_bf16", transA, transB, M, N, K, 1.0f, A, lda,
            B, ldb, 0.0f, out, ldc, CUDA_R_16BF, CUDA_R_16BF,
            biasGeluEpilogue(bias, pre));
}

extern "C" void mrt_gemm_bf16_f32(int transA, int transB, int64_t M, int64_t N,
                                  int64_t K, float alpha, const mrt_bf16 *A,
                                  int64_t lda, const mrt_bf16 *B, int64_t ldb,
                                  float beta, float *C, int64_t ldc) {
  gemmEntry("mrt_gemm_bf16_f32", transA, transB, M, N, K, alpha, A, lda, B,
            ldb, beta, C, ldc, CUDA_R_16BF, CUDA_R_32F);
}

