/* One fp32 AdamW pass over n parameters, as the training step's optimizer
 * makes it: read the parameter, its gradient and both moments, write the
 * parameter and both moments (28 bytes a parameter). bench/cpu/
 * gemm_ceiling.py compiles it (cc -O3 -march=native -fopenmp) and times it
 * on the step's parameter count: the memory floor of the step's update,
 * which no GEMM speed removes. */
#include <math.h>
#include <stdint.h>

void adamw_pass(float *p, const float *g, float *m, float *v, int64_t n,
                float lr, float beta1, float beta2, float eps,
                float weight_decay, float grad_scale, float bias1,
                float bias2) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float grad = g[i] * grad_scale;
    float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / bias1) / (sqrtf(vi / bias2) + eps) +
                  weight_decay * p[i]);
  }
}
