/* A stand-in for a compiled step.so, for megatron-run's tests.
 *
 * Compiled with -DMOCK_TP=1 or 2, -DMOCK_TRAIN=0/1 (export mgt_train_step,
 * the "train_step" entry, AdamW state and hyperparameters args; default 1),
 * -DMOCK_GRADS=0/1 ("grad" args, as --export-grads; default 0) and
 * -DMOCK_LOGITS=0/1 (a "logits" arg, as --export-logits; default 0). Its
 * manifest describes a tiny GPT-2-like model (padded vocabulary, fused QKV
 * split in 3 sections, row- and column-split weights, replicated layer norms)
 * plus input_ids/targets. mgt_forward gathers every parameter into its GLOBAL
 * tensor (local slice placed by this file's own implementation of the slicing
 * rule, then an all-reduce sum over TP), checks that padding is zero, and
 * returns a checksum of the global tensors and the batch, so every rank and
 * every TP size returns the same value for the same weights and data.
 *
 * mgt_train_step: results[0] = the checksum (before the update); the
 * gradient of parameter i at checkpoint flat index k with value w is
 *   g = 0.05f*w + 0.01f*(float)((k + 3*i) % 7 - 3) + 0.001f*(float)(h % 11)
 * (float math, left to right; padding 0) with h = sum_j (j+1)*input_ids[j] +
 * 3*targets[j]; results[1] = its global L2 norm (double sum in global order);
 * the update is torch.optim.AdamW's (adamw below) with the hyperparameters arg, after clipping
 * (coef = clip/(norm+1e-6) when < 1, as torch's clip_grad_norm_); "grad" args
 * get the unclipped gradient. Everything is computed on global tensors, so
 * TP=1 and TP=2 train bit-identically.
 *
 * logits (MOCK_LOGITS, the last arg): f32 global [BATCH, SEQ, VPAD], local
 * [BATCH, SEQ, VPAD/TP], checkpoint [BATCH, SEQ, VOCAB], split on dim 2 at
 * TP > 1. mgt_forward writes this rank's columns: global column v < VOCAB of
 * row (b, t) holds
 *   (float)(b*1000.0 + t + 100.0*input_ids[b, t] + 0.001*v)   (double math)
 * and padding columns (v >= VOCAB) hold -12345 (garbage megatron-run must
 * drop).
 *
 * -DMOCK_DEVICE=1 (with mock_device_rt.c): the manifest says target "cuda"
 * and puts every argument but the hyperparameters in "device" memory; both
 * entries abort unless megatron-run passes exactly those as device buffers.
 * With -DMOCK_CPU_RUNTIME=1, linked to libmegatron_rt alone, it is a step
 * whose runtime lacks the device memory its manifest asks for.
 *
 * Environment:
 *   MOCK_DUMP_DIR=D    rank 0 writes D/step<k>.txt at its k-th mgt_forward
 *                      call and D/train<k>.txt at its k-th mgt_train_step
 *                      call: one line "name n v0 v1 ..." per arg (global
 *                      tensor restricted to checkpoint_shape, row-major;
 *                      floats with %.9g; train: the args before the update,
 *                      then "mock.loss 1 X", "mock.grad_norm 1 G" and
 *                      "mock.grad.<param> n ..." the unclipped gradients)
 *   MOCK_BREAK_RANK=r  world rank r's manifest renames h.0.ln_1.weight to
 *                      h.0.ln_9.weight (a failure only that rank sees)
 *   MOCK_EXIT_RANK=r   world rank r exits with status 3 inside mgt_forward
 *                      and mgt_train_step
 *   MOCK_STOP_RANK=r   world rank r stops (SIGSTOP) inside mgt_train_step,
 *                      at its second call: alive, but never answering
 */
#include "megatron_rt/comm.h"
#include "megatron_rt/contract.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MOCK_TP
#define MOCK_TP 1
#endif

#ifndef MOCK_TRAIN
#define MOCK_TRAIN 1
#endif

#ifndef MOCK_DEVICE
#define MOCK_DEVICE 0
#endif
#ifndef MOCK_GRADS
#define MOCK_GRADS 0
#endif
#ifndef MOCK_LOGITS
#define MOCK_LOGITS 0
#endif

#define MOCK_EXPORT __attribute__((visibility("default")))

enum { MAXDIM = 3, NBASE = 12, NPARAMS = 10, BATCH = 2, SEQ = 3, VOCAB = 10 };
/* Base args (params, input_ids, targets), then per param its exp_avg and
 * exp_avg_sq, then the grads, then hyperparameters, then logits. */
#define NARGS                                                                \
  (NBASE + (MOCK_TRAIN ? 2 * NPARAMS + (MOCK_GRADS ? NPARAMS : 0) + 1 : 0) + \
   (MOCK_LOGITS ? 1 : 0))
/* The padded vocabulary depends on TP (as in the compiler: a multiple of a
 * TP-dependent size); the checkpoint holds only VOCAB rows. */
#define VPAD (MOCK_TP == 1 ? 12 : 16)

typedef struct {
  const char *name, *role;
  int ndim;
  long global[MAXDIM], ckpt[MAXDIM];
  int split_dim; /* -1: replicated */
  int sections;
  int param; /* adam_m / adam_v / grad: index of the parameter; else -1 */
} MockArg;

static const MockArg kBase[NBASE] = {
    {"wte.weight", "param", 2, {VPAD, 4}, {VOCAB, 4}, 0, 1, -1},
    {"wpe.weight", "param", 2, {3, 4}, {3, 4}, -1, 1, -1},
    {"h.0.ln_1.weight", "param", 1, {4}, {4}, -1, 1, -1},
    {"h.0.ln_1.bias", "param", 1, {4}, {4}, -1, 1, -1},
    {"h.0.attn.c_attn.weight", "param", 2, {4, 12}, {4, 12}, 1, 3, -1},
    {"h.0.attn.c_attn.bias", "param", 1, {12}, {12}, 0, 3, -1},
    {"h.0.attn.c_proj.weight", "param", 2, {4, 4}, {4, 4}, 0, 1, -1},
    {"h.1.mlp.c_proj.weight", "param", 2, {8, 4}, {8, 4}, 0, 1, -1},
    {"ln_f.weight", "param", 1, {4}, {4}, -1, 1, -1},
    {"ln_f.bias", "param", 1, {4}, {4}, -1, 1, -1},
    {"input_ids", MGT_ROLE_TOKENS, 2, {BATCH, SEQ}, {BATCH, SEQ}, -1, 1, -1},
    {"targets", "targets", 2, {BATCH, SEQ}, {BATCH, SEQ}, -1, 1, -1},
};

/* The initialisation the model states for each parameter of kBase (what
 * gpt2-mlir writes as tp.init): GPT-2's rules, the residual projections
 * scaled for the 2 layers. */
static const struct {
  const char *kind;
  double value;
} kInit[NPARAMS] = {
    {MGT_INIT_NORMAL, 0.02},   {MGT_INIT_NORMAL, 0.02},
    {MGT_INIT_CONSTANT, 1.0},  {MGT_INIT_CONSTANT, 0.0},
    {MGT_INIT_NORMAL, 0.02},   {MGT_INIT_CONSTANT, 0.0},
    {MGT_INIT_NORMAL, 0.01},   {MGT_INIT_NORMAL, 0.01},
    {MGT_INIT_CONSTANT, 1.0},  {MGT_INIT_CONSTANT, 0.0},
};

static MockArg kArgs[NARGS];
static char kNames[NARGS][64];
static int kHyper = -1;                /* index of hyperparameters */
static int kLogits = -1;               /* index of logits */
static int kAdamM[NPARAMS], kAdamV[NPARAMS], kGrad[NPARAMS];

static void initArgs(void) {
  static int done = 0;
  if (done)
    return;
  done = 1;
  for (int i = 0; i < NBASE; ++i)
    kArgs[i] = kBase[i];
  int n = NBASE;
  for (int p = 0; p < NPARAMS; ++p)
    kAdamM[p] = kAdamV[p] = kGrad[p] = -1;
  if (MOCK_LOGITS) {
    MockArg l = {"logits", "logits", 3, {BATCH, SEQ, VPAD},
                 {BATCH, SEQ, VOCAB}, MOCK_TP > 1 ? 2 : -1, 1, -1};
    kLogits = NARGS - 1;
    kArgs[kLogits] = l;
  }
  if (!MOCK_TRAIN)
    return;
  for (int k = 0; k < (MOCK_GRADS ? 3 : 2); ++k)
    for (int p = 0; p < NPARAMS; ++p) {
      static const char *const suffix[3] = {"exp_avg", "exp_avg_sq", "grad"};
      static const char *const role[3] = {"adam_m", "adam_v", "grad"};
      kArgs[n] = kBase[p];
      snprintf(kNames[n], sizeof(kNames[n]), "%s.%s", kBase[p].name,
               suffix[k]);
      kArgs[n].name = kNames[n];
      kArgs[n].role = role[k];
      kArgs[n].param = p;
      (k == 0 ? kAdamM : k == 1 ? kAdamV : kGrad)[p] = n;
      ++n;
    }
  MockArg h = {"hyperparameters", MGT_ROLE_HYPERPARAMETERS, 1,
               {MGT_HP_COUNT}, {MGT_HP_COUNT}, -1, 1, -1};
  kHyper = n;
  kArgs[n++] = h;
}
static int envInt(const char *name) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : -1;
}

/* The world rank before MPI is initialised (mgt_manifest runs first). */
static int launcherRank(void) {
  int r = envInt("OMPI_COMM_WORLD_RANK");
  return r >= 0 ? r : envInt("PMI_RANK");
}

static long localDim(const MockArg *a, int d) {
  return d == a->split_dim ? a->global[d] / MOCK_TP : a->global[d];
}

static void appendShape(char **p, const long *shape, int ndim) {
  *p += sprintf(*p, "[");
  for (int d = 0; d < ndim; ++d)
    *p += sprintf(*p, "%s%ld", d ? ", " : "", shape[d]);
  *p += sprintf(*p, "]");
}

/* MOCK_BREAK_RANK: h.0.ln_1.weight (and its state) becomes h.0.ln_9.weight,
 * with no init rule. */
static void mockName(char *out, const char *name, int broken) {
  const char *from = "h.0.ln_1.weight";
  if (broken && strncmp(name, from, strlen(from)) == 0)
    sprintf(out, "h.0.ln_9.weight%s", name + strlen(from));
  else
    sprintf(out, "%s", name);
}

MOCK_EXPORT const char *mgt_manifest(void) {
  static char buf[32768];
  char *p = buf;
  initArgs();
  const int broken = launcherRank() >= 0 && launcherRank() == envInt("MOCK_BREAK_RANK");
  p += sprintf(p,
               "{\"format\": \"" MGT_MANIFEST_FORMAT "\", \"version\": %d, "
               "\"model\": \"mock\", \"checkpoint_names\": "
               "\"" MGT_CHECKPOINT_NAMES_HF_GPT2 "\", \"dp\": 1, \"tp\": %d, \"batch\": %d, "
               "\"seq\": %d, \"valid_vocab\": %d, %s%s\"args\": [",
               MGT_MANIFEST_VERSION, MOCK_TP, BATCH, SEQ, VOCAB,
               MOCK_TRAIN ? "\"entries\": [\"forward\", \"train_step\"], " : "",
               MOCK_DEVICE ? "\"target\": \"cuda\", " : "");
  for (int i = 0; i < NARGS; ++i) {
    const MockArg *a = &kArgs[i];
    long local[MAXDIM];
    for (int d = 0; d < a->ndim; ++d)
      local[d] = localDim(a, d);
    char name[96], param[96];
    mockName(name, a->name, broken);
    mockName(param, a->param >= 0 ? kArgs[a->param].name : "", broken);
    p += sprintf(p, "%s\n {\"name\": \"%s\", \"role\": \"%s\", \"dtype\": \"%s\", "
                 "\"global_shape\": ",
                 i ? "," : "", name, a->role,
                 i == 10 || i == 11 ? "i32" : "f32");
    appendShape(&p, a->global, a->ndim);
    p += sprintf(p, ", \"local_shape\": ");
    appendShape(&p, local, a->ndim);
    if (i != 10 && i != 11 && i != kHyper) {
      p += sprintf(p, ", \"checkpoint_shape\": ");
      appendShape(&p, a->ckpt, a->ndim);
    }
    if (a->param >= 0)
      p += sprintf(p, ", \"param\": \"%s\"", param);
    if (i < NPARAMS && strcmp(name, a->name) == 0)
      p += sprintf(p, ", \"init\": {\"kind\": \"%s\", \"value\": %.17g}",
                   kInit[i].kind, kInit[i].value);
    if (MOCK_DEVICE)
      p += sprintf(p, ", \"memory\": \"%s\"", i == kHyper ? "host" : "device");
    if (a->split_dim >= 0)
      p += sprintf(p, ", \"split\": [{\"dim\": %d, \"axis\": \"tp\", "
                   "\"sections\": %d}]}",
                   a->split_dim, a->sections);
    else
      p += sprintf(p, ", \"split\": []}");
  }
  sprintf(p, "]}\n");
  return buf;
}

/* Independent implementation of the slicing rule: local -> global index. */
static long toGlobal(const MockArg *a, int d, long l, long rank) {
  if (d != a->split_dim)
    return l;
  const long chunk = a->global[d] / (a->sections * MOCK_TP);
  const long s = l / chunk;
  return s * (a->global[d] / a->sections) + rank * chunk + l % chunk;
}

/* The GLOBAL tensor [rows*cols] (padded layout) of f32 arg i; *ok = 0 when
 * replicas differ. Collective over TP. */
static float *globalOf(mrt_context *ctx, int i, void **args, int *ok) {
  const MockArg *a = &kArgs[i];
  const long rank = (long)mrt_axis_rank(ctx, MRT_AXIS_TP);
  const long cols = a->ndim == 2 ? a->global[1] : 1;
  const long rows = a->global[0];
  const long lrows = localDim(a, 0), lcols = a->ndim == 2 ? localDim(a, 1) : 1;
  float *g = calloc((size_t)(rows * cols), sizeof(float));
  const float *local = (const float *)args[i];
  if (a->split_dim < 0) {
    /* Replicated: every rank must hold the same values (max == -max(-x)). */
    float *hi = malloc((size_t)(rows * cols) * sizeof(float));
    float *lo = malloc((size_t)(rows * cols) * sizeof(float));
    for (long k = 0; k < rows * cols; ++k) {
      hi[k] = local[k];
      lo[k] = -local[k];
    }
    mrt_all_reduce_f32(ctx, MRT_AXIS_TP, hi, rows * cols, MRT_REDUCE_MAX);
    mrt_all_reduce_f32(ctx, MRT_AXIS_TP, lo, rows * cols, MRT_REDUCE_MAX);
    for (long k = 0; k < rows * cols; ++k)
      if (hi[k] != -lo[k]) {
        fprintf(stderr, "mock_step: replicas of %s differ\n", a->name);
        *ok = 0;
        break;
      }
    memcpy(g, hi, (size_t)(rows * cols) * sizeof(float));
    free(hi);
    free(lo);
  } else {
    for (long r = 0; r < lrows; ++r)
      for (long c = 0; c < lcols; ++c)
        g[toGlobal(a, 0, r, rank) * cols +
          (a->ndim == 2 ? toGlobal(a, 1, c, rank) : 0)] = local[r * lcols + c];
    mrt_all_reduce_f32(ctx, MRT_AXIS_TP, g, rows * cols, MRT_REDUCE_SUM);
  }
  return g;
}

/* Writes "name n v..." for global tensor g of arg a (checkpoint part) and
 * checks its padding is zero. */
static void dumpGlobal(FILE *dump, const char *name, const MockArg *a,
                       const float *g, int *ok) {
  const long cols = a->ndim == 2 ? a->global[1] : 1;
  const long ccols = a->ndim == 2 ? a->ckpt[1] : 1;
  if (dump)
    fprintf(dump, "%s %ld", name, a->ckpt[0] * ccols);
  for (long r = 0; r < a->global[0]; ++r)
    for (long c = 0; c < cols; ++c) {
      const float v = g[r * cols + c];
      if (r >= a->ckpt[0] || c >= ccols) {
        if (v != 0.0f) {
          fprintf(stderr, "mock_step: %s[%ld,%ld] = %g is padding but not 0\n",
                  name, r, c, v);
          *ok = 0;
        }
      } else if (dump) {
        fprintf(dump, " %.9g", v);
      }
    }
  if (dump)
    fprintf(dump, "\n");
}

static FILE *openDump(mrt_context *ctx, const char *kind, int call) {
  const char *dumpDir = getenv("MOCK_DUMP_DIR");
  if (!dumpDir || mrt_world_rank(ctx) != 0)
    return NULL;
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s%d.txt", dumpDir, kind, call);
  FILE *dump = fopen(path, "w");
  if (!dump) {
    perror(path);
    exit(4);
  }
  return dump;
}

/* The checksum of params and batch (NAN on bad padding or replicas); dumps
 * every arg when dump != NULL. */
static float checksum(mrt_context *ctx, void **args, FILE *dump) {
  double sum = 0.0;
  int paddingOk = 1; /* padding zero and replicas equal */
  for (int i = 0; i < NARGS; ++i) {
    const MockArg *a = &kArgs[i];
    if (i == 10 || i == 11) {
      const int *ids = (const int *)args[i];
      if (dump)
        fprintf(dump, "%s %d", a->name, BATCH * SEQ);
      for (long j = 0; j < BATCH * SEQ; ++j) {
        sum += (double)ids[j] * (double)(j + 1) * (i == 10 ? 1e-3 : 1e-4);
        if (dump)
          fprintf(dump, " %d", ids[j]);
      }
      if (dump)
        fprintf(dump, "\n");
      continue;
    }
    /* The forward pass reads params and the batch only; the other args are
     * gathered just for the dump (on every rank: gathering is collective). */
    if ((i >= NBASE && !getenv("MOCK_DUMP_DIR")) || i == kLogits)
      continue;
    float *g = globalOf(ctx, i, args, &paddingOk);
    dumpGlobal(dump, a->name, a, g, &paddingOk);
    if (i < NBASE) {
      const long cols = a->ndim == 2 ? a->global[1] : 1;
      const long ccols = a->ndim == 2 ? a->ckpt[1] : 1;
      for (long r = 0; r < a->ckpt[0]; ++r)
        for (long c = 0; c < ccols; ++c) {
          const long k = r * ccols + c; /* checkpoint flat index */
          sum += (double)g[r * cols + c] * (double)(1 + (k + 3 * i) % 7);
        }
    }
    free(g);
  }
  return paddingOk ? (float)sum : NAN;
}

/* MOCK_CPU_RUNTIME: the device manifest linked to the CPU runtime alone,
 * which megatron-run must refuse before any call. */
#ifndef MOCK_CPU_RUNTIME
#define MOCK_CPU_RUNTIME 0
#endif
#define MOCK_CHECKS_MEMORY (MOCK_DEVICE && !MOCK_CPU_RUNTIME)

#if MOCK_CHECKS_MEMORY
int mock_device_owns(const void *p);
#endif

/* MOCK_DEVICE: each argument must be in the memory its manifest entry says. */
static void checkMemory(void **args) {
#if MOCK_CHECKS_MEMORY
  for (int i = 0; i < NARGS; ++i)
    if (mock_device_owns(args[i]) != (i != kHyper)) {
      fprintf(stderr, "mock_step: %s was passed in %s memory\n", kArgs[i].name,
              i == kHyper ? "device" : "host");
      abort();
    }
#else
  (void)args;
#endif
}

MOCK_EXPORT float mgt_forward(mrt_context *ctx, void **args) {
  static int calls = 0;
  initArgs();
  checkMemory(args);
  if (mrt_world_rank(ctx) == envInt("MOCK_EXIT_RANK")) {
    fprintf(stderr, "mock_step: rank %ld exits in mgt_forward\n",
            (long)mrt_axis_rank(ctx, MRT_AXIS_TP));
    exit(3);
  }
  FILE *dump = openDump(ctx, "step", calls++);
  const float sum = checksum(ctx, args, dump);
  if (dump)
    fclose(dump);
  if (kLogits >= 0) {
    const MockArg *a = &kArgs[kLogits];
    const long rank = (long)mrt_axis_rank(ctx, MRT_AXIS_TP);
    const long lv = localDim(a, 2);
    const int *ids = (const int *)args[10];
    float *out = (float *)args[kLogits];
    for (long b = 0; b < BATCH; ++b)
      for (long t = 0; t < SEQ; ++t)
        for (long c = 0; c < lv; ++c) {
          const long v = toGlobal(a, 2, c, rank);
          out[(b * SEQ + t) * lv + c] =
              v < VOCAB ? (float)(b * 1000.0 + t + 100.0 * ids[b * SEQ + t] +
                                  0.001 * v)
                        : -12345.0f;
        }
  }
  return sum;
}

#if MOCK_TRAIN
/* One torch.optim.AdamW step in PyTorch's order, its scalar factors formed in
 * double and rounded to float once:
 * p *= 1 - lr*wd; m = lerp(m, g, 1-beta1); v = beta2*v + (1-beta2)*g*g;
 * p -= lr/(1-beta1^t) * m / (sqrt(v)/sqrt(1-beta2^t) + eps). */
static void adamw(float *p, const float *g, float *m, float *v, long n,
                  const float *hp) {
  const double lr = hp[MGT_HP_LR], beta1 = hp[MGT_HP_BETA1],
               beta2 = hp[MGT_HP_BETA2];
  const double step = hp[MGT_HP_STEP];
  const float decay = (float)(1.0 - lr * hp[MGT_HP_WEIGHT_DECAY]);
  const float mWeight = (float)(1.0 - beta1), vWeight = (float)(1.0 - beta2);
  const float negStepSize = (float)(-(lr / (1.0 - pow(beta1, step))));
  const float bc2Sqrt = (float)sqrt(1.0 - pow(beta2, step));
  for (long i = 0; i < n; ++i) {
    p[i] *= decay;
    m[i] = mWeight < 0.5f ? m[i] + mWeight * (g[i] - m[i])
                          : g[i] - (g[i] - m[i]) * (1.0f - mWeight);
    v[i] = v[i] * (float)beta2 + vWeight * g[i] * g[i];
    p[i] += negStepSize * m[i] / (sqrtf(v[i]) / bc2Sqrt + hp[MGT_HP_EPS]);
  }
}

MOCK_EXPORT void mgt_train_step(mrt_context *ctx, void **args,
                                float *results) {
  static int calls = 0;
  initArgs();
  checkMemory(args);
  const long rank = (long)mrt_axis_rank(ctx, MRT_AXIS_TP);
  if (mrt_world_rank(ctx) == envInt("MOCK_EXIT_RANK")) {
    fprintf(stderr, "mock_step: rank %ld exits in mgt_train_step\n", rank);
    exit(3);
  }
  if (mrt_world_rank(ctx) == envInt("MOCK_STOP_RANK") && calls == 1)
    raise(SIGSTOP);
  FILE *dump = openDump(ctx, "train", calls++);
  const float loss = checksum(ctx, args, dump);
  const float *hp = (const float *)args[kHyper];
  const int *ids = (const int *)args[10], *tgt = (const int *)args[11];
  long h = 0;
  for (long j = 0; j < BATCH * SEQ; ++j)
    h += (j + 1) * ids[j] + 3 * tgt[j];
  /* Global gradients in the padded global layout; the norm in global order. */
  float *grads[NPARAMS];
  double norm2 = 0.0;
  int ok = 1;
  for (int i = 0; i < NPARAMS; ++i) {
    const MockArg *a = &kArgs[i];
    const long cols = a->ndim == 2 ? a->global[1] : 1;
    const long ccols = a->ndim == 2 ? a->ckpt[1] : 1;
    float *w = globalOf(ctx, i, args, &ok);
    grads[i] = calloc((size_t)(a->global[0] * cols), sizeof(float));
    for (long r = 0; r < a->ckpt[0]; ++r)
      for (long c = 0; c < ccols; ++c) {
        const long k = r * ccols + c;
        const float g = 0.05f * w[r * cols + c] +
                        0.01f * (float)((k + 3 * i) % 7 - 3) +
                        0.001f * (float)(h % 11);
        grads[i][r * cols + c] = g;
        norm2 += (double)g * (double)g;
      }
    free(w);
    char name[128];
    snprintf(name, sizeof(name), "mock.grad.%s", a->name);
    dumpGlobal(dump, name, a, grads[i], &ok);
  }
  const double norm = sqrt(norm2);
  float coef = 1.0f;
  if (hp[MGT_HP_GRAD_CLIP] > 0.0f) {
    const double c = (double)hp[MGT_HP_GRAD_CLIP] / (norm + 1e-6);
    if (c < 1.0)
      coef = (float)c;
  }
  for (int i = 0; i < NPARAMS; ++i) {
    const MockArg *a = &kArgs[i];
    const long cols = a->ndim == 2 ? a->global[1] : 1;
    const long lrows = localDim(a, 0), lcols = a->ndim == 2 ? localDim(a, 1) : 1;
    const long n = lrows * lcols;
    float *lg = malloc((size_t)n * sizeof(float));
    for (long r = 0; r < lrows; ++r)
      for (long c = 0; c < lcols; ++c)
        lg[r * lcols + c] = grads[i][toGlobal(a, 0, r, rank) * cols +
                                     (a->ndim == 2 ? toGlobal(a, 1, c, rank) : 0)];
    if (MOCK_GRADS)
      memcpy(args[kGrad[i]], lg, (size_t)n * sizeof(float));
    if (coef != 1.0f)
      for (long k = 0; k < n; ++k)
        lg[k] *= coef;
    adamw((float *)args[i], lg, (float *)args[kAdamM[i]],
          (float *)args[kAdamV[i]], n, hp);
    free(lg);
    free(grads[i]);
  }
  if (dump) {
    fprintf(dump, "mock.loss 1 %.9g\nmock.grad_norm 1 %.9g\n", loss,
            (float)norm);
    fclose(dump);
  }
  results[0] = ok ? loss : NAN;
  results[1] = (float)norm;
}
#endif
