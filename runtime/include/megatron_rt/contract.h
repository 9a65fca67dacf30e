/* The contract between the megatron-mlir compiler and its runtime.
 *
 * Everything the generated step library, the runtime libraries and the
 * launcher must agree on is defined here, once: the step's entry points and
 * their signatures, the manifest's schema (format, version, field names and
 * the values of its enumerated fields), the mesh axis and reduction ids the
 * generated code passes to collectives, the slots of the hyperparameters
 * argument and the constants of the activations the compiler inlines and the
 * runtime's kernels compute. The compiler (lib/Target, lib/Conversion,
 * lib/Dialect/TP/Transforms) and the runtime (megatron-run, the kernels) both include
 * this header, so nothing is copied by hand; it depends on nothing, so a
 * host written in any language can read it.
 *
 * A step library whose manifest carries another MGT_MANIFEST_VERSION is
 * refused by megatron-run with both versions named. Change the version with
 * any change below that an older reader would misread. */
#ifndef MEGATRON_RT_CONTRACT_H
#define MEGATRON_RT_CONTRACT_H

/* ---- Step library entry points ------------------------------------------
 * Every entry takes the same array `args`, one pointer per manifest argument
 * in manifest order. */
/* The symbol prefix: entry kind "forward" is exported as "mgt_forward". */
#define MGT_ENTRY_PREFIX "mgt_"
#define MGT_ENTRY_KIND_FORWARD "forward"
#define MGT_ENTRY_KIND_TRAIN_STEP "train_step"
/* A framework's function (megatron-compile --entry): the library's only
 * entry. */
#define MGT_ENTRY_KIND_FUNCTION "function"
/* Generation (gpt2-mlir --generate): the prompt's chunk and one new token
 * per sequence. Both read and write the KV cache in place and write the
 * logits of one position per sequence; they return nothing, as a
 * function. */
#define MGT_ENTRY_KIND_PREFILL "prefill"
#define MGT_ENTRY_KIND_DECODE "decode"
#define MGT_ENTRY_MANIFEST MGT_ENTRY_PREFIX "manifest"
#define MGT_ENTRY_FORWARD MGT_ENTRY_PREFIX MGT_ENTRY_KIND_FORWARD
#define MGT_ENTRY_TRAIN_STEP MGT_ENTRY_PREFIX MGT_ENTRY_KIND_TRAIN_STEP
#define MGT_ENTRY_FUNCTION MGT_ENTRY_PREFIX MGT_ENTRY_KIND_FUNCTION
#define MGT_ENTRY_PREFILL MGT_ENTRY_PREFIX MGT_ENTRY_KIND_PREFILL
#define MGT_ENTRY_DECODE MGT_ENTRY_PREFIX MGT_ENTRY_KIND_DECODE

struct mrt_context;
/* The manifest: NUL-terminated JSON, owned by the library. */
typedef const char *(*mgt_manifest_fn)(void);
/* The forward pass; returns the loss. */
typedef float (*mgt_forward_fn)(struct mrt_context *ctx, void **args);
/* One optimizer step; writes MGT_TRAIN_RESULT_COUNT floats to `results`. */
typedef void (*mgt_train_step_fn)(struct mrt_context *ctx, void **args,
                                  float *results);
/* A function: reads its "input" args, writes its "output" args; prefill and
 * decode have the same signature. */
typedef void (*mgt_function_fn)(struct mrt_context *ctx, void **args);
enum {
  MGT_TRAIN_RESULT_LOSS = 0,
  MGT_TRAIN_RESULT_GRAD_NORM = 1,
  MGT_TRAIN_RESULT_COUNT = 2
};

/* ---- Manifest schema ----------------------------------------------------- */
#define MGT_MANIFEST_FORMAT "megatron-step"
#define MGT_MANIFEST_VERSION 6

/* Top-level fields. */
#define MGT_FIELD_FORMAT "format"
#define MGT_FIELD_VERSION "version"
#define MGT_FIELD_MODEL "model"            /* the step's function (free text) */
#define MGT_FIELD_TARGET "target"          /* MGT_TARGET_* */
#define MGT_FIELD_DP "dp"                  /* the mesh's data-parallel size */
#define MGT_FIELD_TP "tp"                  /* the mesh's tensor-parallel size */
#define MGT_FIELD_BATCH "batch"            /* tokens' global [batch, seq] */
#define MGT_FIELD_SEQ "seq"
#define MGT_FIELD_VALID_VOCAB "valid_vocab" /* the loss's unpadded vocabulary */
/* MGT_DTYPE_BF16 when the step computes in bf16 (--precision=bf16: its
 * GEMMs take bf16 operands), else MGT_DTYPE_F32 (also when absent). */
#define MGT_FIELD_COMPUTE "compute"
/* A function step has no tokens and no loss: batch, seq and valid_vocab are
 * 0. */
#define MGT_FIELD_ENTRIES "entries"        /* MGT_ENTRY_KIND_* */
/* {entry kind: the FLOPs of one call on one rank (GEMMs and attention, as
 * tp-explain counts them)}, for the launcher's model FLOPs utilisation. */
#define MGT_FIELD_FLOPS "flops"
/* How the family's checkpoints name tensors (MGT_CHECKPOINT_NAMES_*; absent:
 * the model's own names). */
#define MGT_FIELD_CHECKPOINT_NAMES "checkpoint_names"
#define MGT_FIELD_ARGS "args"
/* [[arg index, ...], ...]: arguments that hold one tensor per layer, in
 * layer order, of equal size and memory. The host allocates each stack as
 * one buffer, member after member with no gap, so that the step can take
 * the first member's pointer as the whole stack and loop over the layers.
 * An argument is in at most one stack; absent: no stacks. */
#define MGT_FIELD_STACKS "stacks"

/* Fields of each argument. */
#define MGT_FIELD_NAME "name"
#define MGT_FIELD_ROLE "role"              /* MGT_ROLE_* */
#define MGT_FIELD_DTYPE "dtype"            /* MGT_DTYPE_* */
#define MGT_FIELD_GLOBAL_SHAPE "global_shape"
#define MGT_FIELD_LOCAL_SHAPE "local_shape"
#define MGT_FIELD_CHECKPOINT_SHAPE "checkpoint_shape"
#define MGT_FIELD_SPLIT "split" /* [{dim, axis, sections[, stride, size]}] */
#define MGT_FIELD_SPLIT_DIM "dim"
#define MGT_FIELD_SPLIT_AXIS "axis"
#define MGT_FIELD_SPLIT_SECTIONS "sections"
/* A split over a sub-axis of "tp" (MRT_AXIS_TP_SUB): its `size` ranks
 * `stride` apart; absent for a split over the whole axis. */
#define MGT_FIELD_SPLIT_STRIDE "stride"
#define MGT_FIELD_SPLIT_SIZE "size"
#define MGT_FIELD_PARAM "param"            /* state and gradients: its param */
#define MGT_FIELD_MEMORY "memory"          /* MGT_MEMORY_* */
#define MGT_FIELD_INIT "init"              /* params: {kind, value} */
#define MGT_FIELD_INIT_KIND "kind"         /* MGT_INIT_* */
#define MGT_FIELD_INIT_VALUE "value"       /* normal: std; constant: value */

#define MGT_TARGET_CPU "cpu"
#define MGT_TARGET_CUDA "cuda"
#define MGT_MEMORY_HOST "host"
#define MGT_MEMORY_DEVICE "device"
#define MGT_DTYPE_F32 "f32"
#define MGT_DTYPE_I32 "i32"
/* bfloat16 (mrt_bf16): a param stored in bf16, whose fp32 values live in its
 * master (below). */
#define MGT_DTYPE_BF16 "bf16"
/* Hugging Face GPT-2: "transformer." prefixes, attention-mask buffers and
 * the tied lm_head.weight. */
#define MGT_CHECKPOINT_NAMES_HF_GPT2 "hf-gpt2"
/* Hugging Face Llama: its own names, and the rotary_emb.inv_freq buffers of
 * older checkpoints. */
#define MGT_CHECKPOINT_NAMES_HF_LLAMA "hf-llama"

/* Argument roles: what the launcher feeds. The generator states the model's
 * (tokens, targets, params) in the IR; tp-optimizer and tp-export-logits
 * add the others. */
#define MGT_ROLE_PARAM "param"
#define MGT_ROLE_TOKENS "tokens"           /* i32 [batch, seq] */
#define MGT_ROLE_TARGETS "targets"         /* i32 [batch, seq] */
#define MGT_ROLE_HYPERPARAMETERS "hyperparameters" /* f32 [MGT_HP_COUNT] */
#define MGT_ROLE_LOGITS "logits"           /* f32 [batch, seq, vocab]; generation: [batch, vocab] */
#define MGT_ROLE_ADAM_M "adam_m"
#define MGT_ROLE_ADAM_V "adam_v"
#define MGT_ROLE_GRAD "grad"
/* The fp32 master weights of a param stored in bf16 (bf16 mixed precision
 * with ZeRO-1): f32, this dp rank's rows of the param, split like its AdamW
 * state; named p MGT_MASTER_SUFFIX. A checkpoint holds them as the param:
 * the launcher reads the param's tensor into both and saves the master. */
#define MGT_ROLE_MASTER "master"
#define MGT_MASTER_SUFFIX ".master"
/* Generation. A chunk of tokens per sequence: the prompt's (role tokens,
 * [batch, seq]) or the last new one (next_tokens, [batch, 1]); the position
 * of each sequence's first token in it (positions, [batch]); the column
 * whose logits are written (last_index, [batch]); and the keys and values
 * of every position so far (kv_cache, named k_cache and v_cache, [layers,
 * batch, heads, ctx, head_dim], split by heads). */
#define MGT_ROLE_NEXT_TOKENS "next_tokens"
#define MGT_ROLE_POSITIONS "positions"
#define MGT_ROLE_LAST_INDEX "last_index"
#define MGT_ROLE_KV_CACHE "kv_cache"
/* A function's arguments and results, by position: argument i is the input
 * MGT_INPUT_PREFIX "i" ("arg0"), result i the output MGT_OUTPUT_PREFIX "i"
 * ("result0"), each a global tensor the launcher slices or gathers. */
#define MGT_ROLE_INPUT "input"
#define MGT_ROLE_OUTPUT "output"
#define MGT_INPUT_PREFIX "arg"
#define MGT_OUTPUT_PREFIX "result"
/* tp-optimizer names a parameter p's AdamW state p MGT_ADAM_M_SUFFIX and
 * p MGT_ADAM_V_SUFFIX (and megatron-run saves them as "optimizer." those). */
#define MGT_ADAM_M_SUFFIX ".exp_avg"
#define MGT_ADAM_V_SUFFIX ".exp_avg_sq"

/* Initialisation rules of parameters, drawn per element of the global
 * tensor (megatron-run's Init.h says how). */
#define MGT_INIT_NORMAL "normal"           /* normal(0, value) */
#define MGT_INIT_CONSTANT "constant"       /* every element `value` */

/* ---- Mesh axes and reductions --------------------------------------------
 * The generated code names a collective's axis and reduction by these ids;
 * rank r of a (dp, tp) mesh is dp_rank * tp_size + tp_rank. */
#define MGT_AXIS_NAME_DP "dp"
#define MGT_AXIS_NAME_TP "tp"
enum { MRT_AXIS_DP = 0, MRT_AXIS_TP = 1 };
/* A sub-axis of tp (tp factored into smaller axes, as grouped-query
 * attention with more ranks than key/value heads factors it): the `size` tp
 * ranks `stride` apart that share tp_rank / (stride * size) and
 * tp_rank % stride; a rank's index on it is (tp_rank / stride) % size. Both
 * runtimes hold a communicator for every sub-axis of their tp size. */
enum { MRT_AXIS_TP_SUB_BASE = 1 << 20, MRT_AXIS_TP_SUB_STRIDE = 1 << 10 };
#define MRT_AXIS_TP_SUB(stride, size)                                          \
  (MRT_AXIS_TP_SUB_BASE + (stride) * MRT_AXIS_TP_SUB_STRIDE + (size))
enum { MRT_REDUCE_SUM = 0, MRT_REDUCE_MAX = 1 };

/* ---- The hyperparameters argument (f32 [MGT_HP_COUNT], host memory) ------
 * The launcher writes it before every train step; the step's AdamW,
 * gradient clipping and dropout masks (megatron_rt/dropout.h) read it. */
enum {
  MGT_HP_LR = 0,
  MGT_HP_BETA1 = 1,
  MGT_HP_BETA2 = 2,
  MGT_HP_EPS = 3,
  MGT_HP_WEIGHT_DECAY = 4,
  MGT_HP_GRAD_CLIP = 5, /* max global gradient norm; 0 disables clipping */
  MGT_HP_STEP = 6,      /* 1-based AdamW step (bias correction); dropout's */
  MGT_HP_DROPOUT_SEED = 7, /* dropout's seed, an integer below 2^24 */
  MGT_HP_COUNT = 8
};

/* ---- Activation constants --------------------------------------------------
 * GELU, tanh form (GPT-2, cuBLASLt's epilogue):
 *   gelu(x) = 0.5 x (1 + tanh(MGT_GELU_SQRT_2_OVER_PI (x + MGT_GELU_CUBIC x^3))) */
#define MGT_GELU_SQRT_2_OVER_PI 0.7978845608028654
#define MGT_GELU_CUBIC 0.044715

#endif /* MEGATRON_RT_CONTRACT_H */
