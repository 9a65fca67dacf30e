// Unit tests of megatron-run's pieces: the slicing rule, the run enumeration,
// manifest validation, the seeded initialisation, options, token batching
// and the files they read, and the logic of run()'s phases (step library,
// mesh agreement, load or init, step loop, validation, what is saved).
#include "Buffers.h"
#include "Checkpoint.h"
#include "Console.h"
#include "Generate.h"
#include "GlobalWriter.h"
#include "Init.h"
#include "InputFile.h"
#include "Manifest.h"
#include "Mesh.h"
#include "Options.h"
#include "Prompts.h"
#include "Report.h"
#include "RuntimeApi.h"
#include "Sampling.h"
#include "Save.h"
#include "Session.h"
#include "Slicing.h"
#include "StepLibrary.h"
#include "StepLoop.h"
#include "Threads.h"
#include "TokenData.h"
#include "Validation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

using namespace mrun;

namespace {

// Reference: the global index of every local element, straight from the
// definition (sections of G/S, chunks of G/(S*N)).
std::vector<int64_t> referenceSlice(int64_t G, int64_t N, int64_t S,
                                    int64_t r) {
  std::vector<int64_t> out;
  for (int64_t s = 0; s < S; ++s)
    for (int64_t k = 0; k < G / (S * N); ++k)
      out.push_back(s * G / S + r * G / (S * N) + k);
  return out;
}

} // namespace

TEST(Slicing, DimMatchesDefinition) {
  for (int64_t N : {1, 2, 4})
    for (int64_t S : {1, 3})
      for (int64_t G : {N * S, 4 * N * S, 12 * N * S})
        for (int64_t r = 0; r < N; ++r) {
          std::vector<int64_t> got;
          for (const Interval &iv : sliceDim(G, N, S, r))
            for (int64_t k = 0; k < iv.length; ++k) {
              EXPECT_EQ(iv.local + k, static_cast<int64_t>(got.size()));
              got.push_back(iv.global + k);
            }
          EXPECT_EQ(got, referenceSlice(G, N, S, r))
              << "G=" << G << " N=" << N << " S=" << S << " r=" << r;
          for (size_t l = 0; l < got.size(); ++l)
            EXPECT_EQ(localToGlobal(l, G, N, S, r), got[l]);
        }
}

TEST(Slicing, FusedQkvSections) {
  // c_attn: 3 sections (q, k, v) of 64 over TP 2: rank 1 holds the second
  // half of each.
  std::vector<Interval> expect = {{0, 32, 32}, {32, 96, 32}, {64, 160, 32}};
  EXPECT_EQ(sliceDim(192, 2, 3, 1), expect);
  std::vector<Interval> rank0 = {{0, 0, 32}, {32, 64, 32}, {64, 128, 32}};
  EXPECT_EQ(sliceDim(192, 2, 3, 0), rank0);
}

TEST(Slicing, RanksPartitionTheDimension) {
  std::vector<int> seen(96, 0);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t g : referenceSlice(96, 4, 3, r))
      seen[g]++;
  for (int c : seen)
    EXPECT_EQ(c, 1);
}

TEST(Slicing, RejectsIndivisible) {
  EXPECT_THROW(sliceDim(10, 4, 1, 0), std::invalid_argument);
  EXPECT_THROW(sliceDim(12, 2, 4, 0), std::invalid_argument); // 12 % 8
  EXPECT_THROW(sliceDim(12, 2, 1, 2), std::invalid_argument); // rank
  EXPECT_THROW(sliceDim(12, 0, 1, 0), std::invalid_argument);
}

// ZeRO-1's dp rows of a tp slice: a contiguous share of the local
// dimension, across the sections it holds.
TEST(Slicing, NestsASplitInsideAnother) {
  EXPECT_EQ(nestSlice(sliceDim(8, 2, 1, 1), 2, 1),
            (std::vector<Interval>{{0, 6, 2}}));
  // Sections [0, 4), [4, 8), [8, 12) over 2 ranks: rank 0 holds global
  // 0-1, 4-5, 8-9 (6 local); its second half is global 5, 8, 9.
  EXPECT_EQ(nestSlice(sliceDim(12, 2, 3, 0), 2, 1),
            (std::vector<Interval>{{0, 5, 1}, {1, 8, 2}}));
  EXPECT_THROW(nestSlice(sliceDim(8, 2, 1, 0), 3, 0), std::invalid_argument);
  EXPECT_THROW(nestSlice(sliceDim(8, 2, 1, 0), 2, 2), std::invalid_argument);
}

// forEachRun against an element-by-element enumeration.
void checkRuns(const TensorSlice &s) {
  const std::vector<int64_t> local = s.localShape();
  const int64_t n = s.localElements();
  std::vector<int64_t> expect(n), got(n, -2);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rem = flat, ckptFlat = 0, cstride = 1;
    bool pad = false;
    std::vector<int64_t> idx(local.size());
    for (int d = static_cast<int>(local.size()) - 1; d >= 0; --d) {
      idx[d] = rem % local[d];
      rem /= local[d];
    }
    for (int d = static_cast<int>(local.size()) - 1; d >= 0; --d) {
      int64_t g = -1;
      for (const Interval &iv : s.dims[d])
        if (idx[d] >= iv.local && idx[d] < iv.local + iv.length)
          g = iv.global + idx[d] - iv.local;
      pad |= g >= s.checkpointShape[d];
      ckptFlat += g * cstride;
      cstride *= s.checkpointShape[d];
    }
    expect[flat] = pad ? -1 : ckptFlat;
  }
  int64_t next = 0;
  forEachRun(s, [&](int64_t l, int64_t c, int64_t count) {
    EXPECT_EQ(l, next);
    EXPECT_GT(count, 0);
    next = l + count;
    for (int64_t k = 0; k < count; ++k)
      got[l + k] = c < 0 ? -1 : c + k;
  });
  EXPECT_EQ(next, n);
  EXPECT_EQ(got, expect);
}

TEST(Slicing, RunsCoverSlicesAndPadding) {
  for (int64_t N : {1, 2, 4})
    for (int64_t r = 0; r < N; ++r) {
      Arg wte{"wte.weight", "param", "f32", {16, 4}, {16 / N, 4}, {10, 4},
              {{0, "tp", 1}}};
      checkRuns(wte.slice(N, r));
      Arg qkv{"c_attn.weight", "param", "f32", {4, 24}, {4, 24 / N}, {4, 24},
              {{1, "tp", 3}}};
      checkRuns(qkv.slice(N, r));
      Arg bias{"c_attn.bias", "param", "f32", {24}, {24 / N}, {24},
               {{0, "tp", 3}}};
      checkRuns(bias.slice(N, r));
      Arg both{"x", "param", "f32", {8, 12, 4}, {8, 12 / N, 4}, {7, 12, 3},
               {{1, "tp", 3}}};
      checkRuns(both.slice(N, r));
      Arg ln{"ln_f.weight", "param", "f32", {4}, {4}, {4}, {}};
      checkRuns(ln.slice(N, r));
      Arg scalar{"s", "param", "f32", {}, {}, {}, {}};
      checkRuns(scalar.slice(N, r));
    }
}

// A split over a sub-axis of tp (grouped-query attention's key/value heads
// at more ranks than heads): 2 blocks of columns over tp=4, each on the 2
// ranks of its pair (stride 2: tp ranks 0 and 1 hold block 0, 2 and 3
// block 1).
TEST(Slicing, SubAxisSplitGivesEachPairOfRanksItsBlock) {
  Arg wk{"k_proj.weight", "param", "f32", {8, 4}, {4, 4}, {8, 4},
         {{0, "tp", 1, /*stride=*/2, /*size=*/2}}};
  for (int64_t r = 0; r < 4; ++r) {
    const TensorSlice s = wk.slice(4, r);
    checkRuns(s);
    ASSERT_EQ(s.dims[0].size(), 1u);
    EXPECT_EQ(s.dims[0][0].global, r / 2 * 4) << "rank " << r;
    EXPECT_EQ(s.dims[0][0].length, 4);
  }
}

// sliceTensor / unsliceTensor are inverse: unslicing every rank's slice of a
// checkpoint tensor rebuilds it; split dims partition it (each element comes
// from exactly one rank); slicing the rebuilt tensor gives the slices back.
void checkInverse(const Arg &a, int64_t N) {
  int64_t count = 1;
  for (int64_t d : a.checkpointShape)
    count *= d;
  std::mt19937 rng(static_cast<unsigned>(count * 31 + N));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> full(count);
  for (float &x : full)
    x = dist(rng);
  std::vector<float> rebuilt(count, NAN);
  std::vector<int> writes(count, 0);
  for (int64_t r = 0; r < N; ++r) {
    const TensorSlice s = a.slice(N, r);
    std::vector<float> local(s.localElements(), -5.0f);
    sliceTensor(s, full.data(), local.data());
    // Padding is zero; everything else is the checkpoint value.
    forEachRun(s, [&](int64_t l, int64_t c, int64_t n) {
      for (int64_t k = 0; k < n; ++k) {
        EXPECT_EQ(local[l + k], c < 0 ? 0.0f : full[c + k]);
        if (c >= 0)
          writes[c + k]++;
      }
    });
    unsliceTensor(s, local.data(), rebuilt.data());
    std::vector<float> again(s.localElements(), -5.0f);
    sliceTensor(s, rebuilt.data(), again.data());
    EXPECT_EQ(again, local) << a.name << " N=" << N << " rank " << r;
  }
  EXPECT_EQ(std::memcmp(rebuilt.data(), full.data(), count * sizeof(float)), 0)
      << a.name << " N=" << N;
  const int64_t expected = a.splits.empty() ? N : 1;
  for (int64_t c = 0; c < count; ++c)
    ASSERT_EQ(writes[c], expected) << a.name << " N=" << N << " element " << c;
}

TEST(Slicing, UnsliceIsTheInverse) {
  for (int64_t N : {1, 2, 4}) {
    checkInverse(Arg{"wte.weight", "param", "f32", {16, 4}, {16 / N, 4},
                     {10, 4}, {{0, "tp", 1}}},
                 N);
    checkInverse(Arg{"c_attn.weight", "param", "f32", {4, 24}, {4, 24 / N},
                     {4, 24}, {{1, "tp", 3}}},
                 N);
    checkInverse(Arg{"c_attn.bias", "param", "f32", {24}, {24 / N}, {24},
                     {{0, "tp", 3}}},
                 N);
    checkInverse(Arg{"x", "param", "f32", {8, 12, 4}, {8, 12 / N, 4},
                     {7, 12, 3}, {{1, "tp", 3}}},
                 N);
    checkInverse(Arg{"y", "param", "f32", {8, 12, 4}, {8 / N, 12, 4},
                     {5, 12, 4}, {{0, "tp", 2}}},
                 N);
    checkInverse(Arg{"ln_f.weight", "param", "f32", {4}, {4}, {4}, {}, ""},
                 N);
    checkInverse(
        Arg{"padded", "param", "f32", {6, 4}, {6, 4}, {5, 3}, {}, ""}, N);
    checkInverse(Arg{"s", "param", "f32", {}, {}, {}, {}, ""}, N);
  }
}

TEST(Slicing, ContiguousRowSplitIsOneRead) {
  Arg wte{"wte.weight", "param", "f32", {512, 64}, {256, 64}, {512, 64},
          {{0, "tp", 1}}, ""};
  int runs = 0;
  forEachRun(wte.slice(2, 1), [&](int64_t l, int64_t c, int64_t n) {
    ++runs;
    EXPECT_EQ(l, 0);
    EXPECT_EQ(c, 256 * 64);
    EXPECT_EQ(n, 256 * 64);
  });
  EXPECT_EQ(runs, 1);
}

namespace {

std::string manifestWith(const std::string &arg, int tp = 2) {
  return "{\"format\":\"megatron-step\",\"version\":" +
         std::to_string(MGT_MANIFEST_VERSION) + ",\"dp\":1,\"tp\":" +
         std::to_string(tp) +
         ",\"batch\":2,\"seq\":3,\"valid_vocab\":10,\"args\":[" + arg +
         (arg.empty() ? "" : ",") +
         "{\"name\":\"input_ids\",\"role\":\"tokens\",\"dtype\":\"i32\","
         "\"global_shape\":[2,3],\"local_shape\":[2,3],\"split\":[]},"
         "{\"name\":\"targets\",\"role\":\"targets\",\"dtype\":\"i32\","
         "\"global_shape\":[2,3],\"local_shape\":[2,3],\"split\":[]}]}";
}

} // namespace

TEST(Manifest, ParsesTheExample) {
  Manifest m = parseManifest(manifestWith(
      R"({"name": "wte.weight", "role": "param", "dtype": "f32",
          "global_shape": [512, 64], "local_shape": [256, 64],
          "checkpoint_shape": [500, 64],
          "split": [{"dim": 0, "axis": "tp", "sections": 1}]},
         {"name": "h.0.attn.c_attn.weight", "role": "param", "dtype": "f32",
          "global_shape": [64, 192], "local_shape": [64, 96],
          "checkpoint_shape": [64, 192],
          "split": [{"dim": 1, "axis": "tp", "sections": 3}]},
         {"name": "h.3.ln_1.weight", "role": "param", "dtype": "f32",
          "init": {"kind": "constant", "value": 1.0},
          "global_shape": [64], "local_shape": [64], "split": []})"));
  EXPECT_EQ(m.tp, 2);
  ASSERT_EQ(m.args.size(), 5u);
  EXPECT_EQ(m.args[0].checkpointShape, (std::vector<int64_t>{500, 64}));
  EXPECT_EQ(m.args[1].splits[0].sections, 3);
  EXPECT_EQ(m.args[2].checkpointShape, (std::vector<int64_t>{64}));
  EXPECT_EQ(m.tokens, 3);
  EXPECT_EQ(m.targets, 4);
  EXPECT_FALSE(m.args[0].hasInit);
  EXPECT_TRUE(m.args[2].hasInit);
  EXPECT_FALSE(m.args[2].initNormal);
  EXPECT_EQ(m.args[2].initValue, 1.0);
}

// The compiler writes manifests with writeManifest (tp-step-manifest fills
// a Manifest): what it writes reads back as the same struct, and writing
// that again gives the same text.
TEST(Manifest, WriterIsTheReadersInverse) {
  std::string text = manifestWith(
      R"({"name": "wte.weight", "role": "param", "dtype": "f32",
          "global_shape": [512, 64], "local_shape": [256, 64],
          "checkpoint_shape": [500, 64],
          "init": {"kind": "normal", "value": 0.02},
          "split": [{"dim": 0, "axis": "tp", "sections": 1}]},
         {"name": "h.0.attn.c_attn.weight", "role": "param", "dtype": "f32",
          "global_shape": [64, 192], "local_shape": [64, 96],
          "split": [{"dim": 1, "axis": "tp", "sections": 3}]},
         {"name": "h.1.attn.c_attn.weight", "role": "param", "dtype": "f32",
          "global_shape": [64, 192], "local_shape": [64, 96],
          "split": [{"dim": 1, "axis": "tp", "sections": 3}]},
         {"name": "h.3.ln_1.weight", "role": "param", "dtype": "f32",
          "init": {"kind": "constant", "value": 1},
          "global_shape": [64], "local_shape": [64], "split": []})");
  text.insert(1, "\"checkpoint_names\":\"hf-gpt2\",\"stacks\":[[1,2]],"
                 "\"flops\":{\"forward\":8912896,\"train_step\":1.5e3},"
                 "\"model\":\"gpt2\",");
  const Manifest first = parseManifest(text);
  const std::string written = writeManifest(first);
  const Manifest again = parseManifest(written);
  EXPECT_EQ(writeManifest(again), written);
  EXPECT_EQ(again.model, "gpt2");
  EXPECT_EQ(again.checkpointNamesScheme, MGT_CHECKPOINT_NAMES_HF_GPT2);
  EXPECT_EQ(again.stacks, first.stacks);
  EXPECT_EQ(again.flops, first.flops);
  ASSERT_EQ(again.args.size(), first.args.size());
  for (size_t i = 0; i < first.args.size(); ++i) {
    EXPECT_EQ(again.args[i].name, first.args[i].name);
    EXPECT_EQ(again.args[i].checkpointShape, first.args[i].checkpointShape);
    EXPECT_EQ(again.args[i].splits.size(), first.args[i].splits.size());
    EXPECT_EQ(again.args[i].initValue, first.args[i].initValue);
  }
  // Whole numbers as integers, as the compiler always wrote them.
  EXPECT_NE(written.find(R"("value":1})"), std::string::npos) << written;
  EXPECT_NE(written.find(R"("forward":8912896)"), std::string::npos);
  EXPECT_NE(written.find(R"("value":0.02})"), std::string::npos);
}

TEST(CheckpointNames, Schemes) {
  CheckpointNames own = checkpointNamesFor("");
  EXPECT_EQ(own("transformer.h.0.attn.bias"), "transformer.h.0.attn.bias");
  CheckpointNames gpt2 = checkpointNamesFor(MGT_CHECKPOINT_NAMES_HF_GPT2);
  EXPECT_EQ(gpt2("transformer.wte.weight"), "wte.weight");
  EXPECT_EQ(gpt2("h.3.mlp.c_fc.weight"), "h.3.mlp.c_fc.weight");
  EXPECT_EQ(gpt2("h.3.attn.bias"), std::nullopt);
  EXPECT_EQ(gpt2("transformer.h.11.attn.masked_bias"), std::nullopt);
  EXPECT_EQ(gpt2("lm_head.weight"), std::nullopt);
  EXPECT_EQ(gpt2("h.3.attn.c_attn.bias"), "h.3.attn.c_attn.bias");
  CheckpointNames llama = checkpointNamesFor(MGT_CHECKPOINT_NAMES_HF_LLAMA);
  EXPECT_EQ(llama("model.layers.3.mlp.gate_proj.weight"),
            "model.layers.3.mlp.gate_proj.weight");
  EXPECT_EQ(llama("lm_head.weight"), "lm_head.weight");
  EXPECT_EQ(llama("model.layers.3.self_attn.rotary_emb.inv_freq"),
            std::nullopt);
  EXPECT_THROW(checkpointNamesFor("hf-mamba"), std::invalid_argument);
  std::string unknown = manifestWith("");
  unknown.insert(1, "\"checkpoint_names\":\"hf-mamba\",");
  EXPECT_NE(manifestError(unknown).find("unknown checkpoint names \"hf-mamba\" "
                                        "(known: \"hf-gpt2\", \"hf-llama\""),
            std::string::npos);
  std::string gpt2Manifest = manifestWith("");
  gpt2Manifest.insert(1, "\"checkpoint_names\":\"hf-gpt2\",");
  EXPECT_EQ(parseManifest(gpt2Manifest).checkpointNames, gpt2);
}

TEST(Manifest, TargetAndMemory) {
  // Defaults: a CPU step with every argument in host memory.
  Manifest m = parseManifest(manifestWith(""));
  EXPECT_EQ(m.target, "cpu");
  EXPECT_FALSE(m.args[0].onDevice);
  std::string cuda = manifestWith(
      R"({"name":"w","role":"param","dtype":"f32","memory":"device",
          "global_shape":[8],"local_shape":[8],"split":[]})");
  cuda.insert(1, "\"target\":\"cuda\",");
  m = parseManifest(cuda);
  EXPECT_EQ(m.target, "cuda");
  EXPECT_TRUE(m.args[0].onDevice);
  EXPECT_FALSE(m.args[1].onDevice);

  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32","memory":"gpu",
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("\"memory\" must be \"host\" or \"device\""),
            std::string::npos);
  std::string tpu = manifestWith("");
  tpu.insert(1, "\"target\":\"tpu\",");
  EXPECT_NE(manifestError(tpu).find("\"target\" must be \"cpu\" or \"cuda\""),
            std::string::npos);
}

// Two layers' parameters of one shape (args 0 and 1), a third of another
// (arg 2), with `stacks` as the manifest's "stacks".
static std::string manifestWithStacks(const std::string &stacks) {
  std::string text = manifestWith(
      R"({"name":"h.0.w","role":"param","dtype":"f32","global_shape":[4],
          "local_shape":[4],"split":[]},
         {"name":"h.1.w","role":"param","dtype":"f32","global_shape":[4],
          "local_shape":[4],"split":[]},
         {"name":"h.1.b","role":"param","dtype":"f32","global_shape":[3],
          "local_shape":[3],"split":[]})",
      1);
  text.pop_back();
  return text + ",\"stacks\":" + stacks + "}";
}

TEST(Manifest, RejectsBadStacks) {
  EXPECT_NE(manifestError(manifestWithStacks("[[0]]"))
                .find("stacks[0] must list two or more arg indices"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWithStacks("[[0, 7]]"))
                .find("stacks[0]: 7 is not an arg index (0..4)"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWithStacks("[[0, 1], [1, 0]]"))
                .find("stacks[1]: \"h.1.w\" is already in stacks[0]"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWithStacks("[[1, 2]]"))
                .find("stacks[0]: \"h.1.b\" differs from \"h.1.w\" in size "
                      "or memory"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWithStacks("{}"))
                .find("\"stacks\" must be an array"),
            std::string::npos);
}

TEST(Manifest, RejectsHyperparametersOnTheDevice) {
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"hp","role":"hyperparameters","dtype":"f32",
                    "memory":"device","global_shape":[8],"local_shape":[8],
                    "split":[]})"))
                .find("\"hp\" must be in host memory"),
            std::string::npos);
}

TEST(Manifest, RejectsMalformedArgs) {
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "global_shape":[8],"local_shape":[8],"split":[3]})"))
                .find("split entries must be objects"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "global_shape":[8],"local_shape":[2],
                    "split":[{"dim":0,"axis":"tp"},{"dim":0,"axis":"tp"}]})"))
                .find("dim 0 split twice"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "global_shape":[8],"local_shape":[4],
                    "split":[{"dim":0,"axis":"tp","stride":2,"size":2}]})"))
                .find("split over a sub-axis of \"tp\" with stride 2 and "
                      "size 2, which tp=2 does not factor into"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"input_ids","role":"param","dtype":"f32",
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("duplicate arg name \"input_ids\""),
            std::string::npos);
  EXPECT_NE(manifestError(
                R"({"format":"megatron-step","version":6,"dp":1,"tp":1,"batch":2,
                    "seq":3,"valid_vocab":10,"args":[]})")
                .find("needs one arg with role \"tokens\" and one with "
                      "\"targets\""),
            std::string::npos);
}

// A param stored in bf16 keeps its fp32 values in its master (ZeRO-1's
// rows over dp), and only such a param has one.
TEST(Manifest, TiesMasterWeightsToBf16Params) {
  const std::string master =
      R"({"name":"w.master","role":"master","dtype":"f32","param":"w",
          "global_shape":[8,4],"local_shape":[8,4],
          "split":[{"dim":0,"axis":"dp","sections":1}]})";
  Manifest m = parseManifest(manifestWith(
      R"({"name":"w","role":"param","dtype":"bf16",
          "global_shape":[8,4],"local_shape":[8,4],"split":[]},)" + master));
  EXPECT_EQ(m.args[0].master, 1);
  EXPECT_EQ(m.args[0].elementBytes(), 2u);
  EXPECT_EQ(m.args[1].paramIndex, 0);
  EXPECT_TRUE(m.args[1].isOptimizerState());
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"bf16",
                    "global_shape":[8,4],"local_shape":[8,4],"split":[]})"))
                .find("parameter \"w\" is bf16 but has no master arg (its "
                      "fp32 values)"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "global_shape":[8,4],"local_shape":[8,4],"split":[]},)" +
                master))
                .find("parameter \"w\" is f32 but has a master arg (only a "
                      "bf16 param has one)"),
            std::string::npos);
}

TEST(Manifest, RejectsInconsistentShapes) {
  EXPECT_NE(manifestError("not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(manifestError("[1]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "global_shape":[8,4],"local_shape":[8,4],
                    "split":[{"dim":0,"axis":"tp","sections":1}]})"))
                .find("local_shape [8, 4] does not match"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "global_shape":[6,4],"local_shape":[3,4],
                    "split":[{"dim":0,"axis":"tp","sections":2}]})"))
                .find("not divisible"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "global_shape":[8],"local_shape":[8],
                    "checkpoint_shape":[9],"split":[]})"))
                .find("exceeds global_shape"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"i32",
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("params must be f32 or bf16"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"bogus","dtype":"f32",
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("unsupported role"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "global_shape":[8],"local_shape":[4],
                    "split":[{"dim":0,"axis":"dp","sections":1}]})"))
                .find("only the tokens' and targets' batch (dim 0), AdamW "
                      "state and master weights (ZeRO-1) and a function's "
                      "inputs and outputs are split over \"dp\""),
            std::string::npos);
  EXPECT_NE(manifestError(
                "{\"format\":\"megatron-step\",\"version\":1,\"tp\":1,"
                "\"batch\":1,\"seq\":1,\"valid_vocab\":1,\"args\":[]}")
                .find("the step library was built for manifest version 1, "
                      "this megatron-run reads version " +
                      std::to_string(MGT_MANIFEST_VERSION)),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "init":{"kind":"uniform","value":1},
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("init kind \"uniform\" (known: \"normal\", "
                      "\"constant\")"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "init":{"kind":"normal"},
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("init needs a finite number \"value\""),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "init":{"kind":"normal","value":-1},
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("init normal needs a non-negative std"),
            std::string::npos);
}

namespace {

const char *const kTrainArgs = R"(
  {"name":"w","role":"param","dtype":"f32","global_shape":[8,4],
   "local_shape":[4,4],"checkpoint_shape":[7,4],
   "split":[{"dim":0,"axis":"tp","sections":1}]},
  {"name":"b","role":"param","dtype":"f32","global_shape":[4],
   "local_shape":[4],"split":[]},
  {"name":"w.exp_avg","role":"adam_m","dtype":"f32","param":"w",
   "global_shape":[8,4],"local_shape":[4,4],"checkpoint_shape":[7,4],
   "split":[{"dim":0,"axis":"tp","sections":1}]},
  {"name":"w.exp_avg_sq","role":"adam_v","dtype":"f32","param":"w",
   "global_shape":[8,4],"local_shape":[4,4],"checkpoint_shape":[7,4],
   "split":[{"dim":0,"axis":"tp","sections":1}]},
  {"name":"b.exp_avg","role":"adam_m","dtype":"f32","param":"b",
   "global_shape":[4],"local_shape":[4],"split":[]},
  {"name":"b.exp_avg_sq","role":"adam_v","dtype":"f32","param":"b",
   "global_shape":[4],"local_shape":[4],"split":[]},
  {"name":"hyperparameters","role":"hyperparameters","dtype":"f32",
   "global_shape":[8],"local_shape":[8],"split":[]})";

// kTrainArgs and a gradient of each parameter (--export-grads).
const std::string kTrainArgsWithGrads =
    std::string(kTrainArgs) +
      R"(,{"name":"w.grad","role":"grad","dtype":"f32","param":"w",
           "global_shape":[8,4],"local_shape":[4,4],"checkpoint_shape":[7,4],
           "split":[{"dim":0,"axis":"tp","sections":1}]},
          {"name":"b.grad","role":"grad","dtype":"f32","param":"b",
           "global_shape":[4],"local_shape":[4],"split":[]})";

std::string trainManifest(const std::string &args,
                          const std::string &entries =
                              R"("entries":["forward","train_step"],)") {
  std::string m = manifestWith(args);
  return m.insert(1, entries);
}

std::string replaceFirst(std::string s, const std::string &from,
                         const std::string &to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

} // namespace

namespace {

// A function's manifest on a dp=2 x tp=2 mesh: an input split over both
// axes, a replicated output.
std::string functionManifest(const std::string &args,
                             const std::string &entries = "[\"function\"]",
                             int batch = 0) {
  return "{\"format\":\"megatron-step\",\"version\":" +
         std::to_string(MGT_MANIFEST_VERSION) +
         ",\"dp\":2,\"tp\":2,\"batch\":" + std::to_string(batch) +
         ",\"seq\":0,\"valid_vocab\":0,\"model\":\"main\",\"entries\":" +
         entries + ",\"args\":[" + args + "]}";
}

const char *const kFunctionArgs =
    R"({"name":"arg0","role":"input","dtype":"f32","global_shape":[4,8],
        "local_shape":[2,4],"split":[{"dim":0,"axis":"dp","sections":1},
        {"dim":1,"axis":"tp","sections":1}]},
       {"name":"result0","role":"output","dtype":"f32","global_shape":[4],
        "local_shape":[4],"split":[]})";

} // namespace

TEST(Manifest, ParsesAFunctionStep) {
  Manifest m = parseManifest(functionManifest(kFunctionArgs));
  EXPECT_TRUE(m.hasEntry(MGT_ENTRY_KIND_FUNCTION));
  EXPECT_EQ(m.model, "main");
  ASSERT_EQ(m.args.size(), 2u);
  EXPECT_TRUE(m.args[0].isFunctionIO());
  EXPECT_TRUE(m.args[1].isFunctionIO());
  EXPECT_EQ(m.args[0].slice(2, 1, 2, 1).localShape(),
            (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(m.tokens, -1);
  EXPECT_EQ(m.targets, -1);
}

TEST(Manifest, RejectsMalformedFunctionSteps) {
  EXPECT_NE(manifestError(functionManifest(kFunctionArgs,
                                           R"(["function","forward"])"))
                .find("a \"function\" step has no other entry"),
            std::string::npos);
  EXPECT_NE(manifestError(functionManifest(kFunctionArgs, "[\"function\"]", 2))
                .find("a \"function\" step has batch, seq and valid_vocab 0"),
            std::string::npos);
  EXPECT_NE(manifestError(functionManifest(
                R"({"name":"w","role":"param","dtype":"f32",
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("role \"param\" in a \"function\" step (only "
                      "\"input\" and \"output\")"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"arg0","role":"input","dtype":"f32",
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("role \"input\" outside a \"function\" step"),
            std::string::npos);
  EXPECT_NE(manifestError(functionManifest(
                R"({"name":"arg0","role":"input","dtype":"i32",
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("dtype \"i32\" (a function's inputs are f32)"),
            std::string::npos);
}

TEST(Manifest, TrainArgs) {
  Manifest m = parseManifest(trainManifest(kTrainArgs));
  EXPECT_TRUE(m.hasEntry("train_step"));
  EXPECT_FALSE(m.hasGrads());
  EXPECT_EQ(m.hyperparameters, 6);
  EXPECT_EQ(m.args[0].adamM, 2);
  EXPECT_EQ(m.args[0].adamV, 3);
  EXPECT_EQ(m.args[1].adamM, 4);
  EXPECT_EQ(m.args[1].grad, -1);
  EXPECT_EQ(m.args[3].paramIndex, 0);
  EXPECT_EQ(m.args[3].param, "w");
  // Without "entries": forward only.
  EXPECT_EQ(parseManifest(manifestWith("")).entries,
            std::vector<std::string>{"forward"});
  // Grads for every param.
  Manifest g = parseManifest(trainManifest(kTrainArgsWithGrads));
  EXPECT_TRUE(g.hasGrads());
  EXPECT_EQ(g.args[0].grad, 7);
}

// ZeRO-1: AdamW state split over dp within the parameter's tp split.
TEST(Manifest, AcceptsAdamStateSplitOverDp) {
  const std::string zero = replaceFirst(
      kTrainArgs, R"("name":"w.exp_avg","role":"adam_m","dtype":"f32","param":"w",
   "global_shape":[8,4],"local_shape":[4,4],"checkpoint_shape":[7,4],
   "split":[{"dim":0,"axis":"tp","sections":1}]})",
      R"("name":"w.exp_avg","role":"adam_m","dtype":"f32","param":"w",
   "global_shape":[8,4],"local_shape":[4,4],"checkpoint_shape":[7,4],
   "split":[{"dim":0,"axis":"tp","sections":1},{"dim":0,"axis":"dp"}]})");
  Manifest m = parseManifest(trainManifest(zero));
  const Arg &state = m.args[m.args[0].adamM];
  ASSERT_EQ(state.splits.size(), 2u);
  // tp rank 1 holds rows 4-7, of which dp rank 1 of 2 takes rows 6-7.
  EXPECT_EQ(state.slice(2, 1, 2, 1).dims[0],
            (std::vector<Interval>{{0, 6, 2}}));
  EXPECT_EQ(state.slice(2, 1, 2, 1).localShape(),
            (std::vector<int64_t>{2, 4}));
  EXPECT_NE(manifestError(trainManifest(replaceFirst(
                zero, R"({"dim":0,"axis":"dp"})",
                R"({"dim":0,"axis":"dp","sections":2})")))
                .find("dim 0 split twice over \"dp\" with sections"),
            std::string::npos);
}

TEST(Manifest, TrainArgErrors) {
  auto err = [](const std::string &text, const std::string &what) {
    const std::string e = manifestError(text);
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  err(trainManifest(replaceFirst(kTrainArgs, R"("param":"b")", R"("param":"q")")),
      R"("param": "q" is not a parameter)");
  err(trainManifest(replaceFirst(kTrainArgs, R"("param":"w",
   "global_shape":[8,4],"local_shape":[4,4],"checkpoint_shape":[7,4])",
                                 R"("param":"w",
   "global_shape":[8,4],"local_shape":[4,4],"checkpoint_shape":[8,4])")),
      "shapes or split differ from those of parameter \"w\"");
  err(trainManifest(replaceFirst(kTrainArgs, R"("name":"b.exp_avg_sq","role":"adam_v")",
                                 R"("name":"b.exp_avg_sq","role":"adam_m")")),
      "parameter \"b\" has more than one adam_m arg");
  err(trainManifest(replaceFirst(kTrainArgs, R"("global_shape":[8],"local_shape":[8])",
                                 R"("global_shape":[7],"local_shape":[7])")),
      "must have global and local shape [8]");
  err(trainManifest(replaceFirst(kTrainArgs, R"(,
  {"name":"hyperparameters")", R"(,
  {"name":"hp","role":"param","dtype":"f32","global_shape":[1],"local_shape":[1],"split":[]},
  {"name":"hyperparameters")")),
      "parameter \"hp\" has no adam_m / adam_v arg");
  err(trainManifest(replaceFirst(kTrainArgs, R"("role":"hyperparameters")",
                                 R"("role":"param")")),
      "no adam_m / adam_v");
  err(trainManifest(kTrainArgs, R"("entries":["forward","backward"],)"),
      "unknown entry \"backward\"");
  err(trainManifest(std::string(kTrainArgs) +
                    R"(,{"name":"w.grad","role":"grad","dtype":"f32","param":"w",
           "global_shape":[8,4],"local_shape":[4,4],"checkpoint_shape":[7,4],
           "split":[{"dim":0,"axis":"tp","sections":1}]})"),
      "parameter \"b\" has no grad arg");
  err(trainManifest(replaceFirst(kTrainArgs, R"("param":"w",)", "")),
      "missing or non-string \"param\"");
  // Forward-only manifests need no optimizer state.
  EXPECT_EQ(manifestError(trainManifest(
                R"({"name":"b","role":"param","dtype":"f32",
                    "global_shape":[4],"local_shape":[4],"split":[]})",
                "")),
            "");
}

TEST(Manifest, Logits) {
  // batch 2, seq 3, valid_vocab 10; padded vocabulary 16 split over tp=2.
  const std::string logits =
      R"({"name":"logits","role":"logits","dtype":"f32",
          "global_shape":[2,3,16],"local_shape":[2,3,8],
          "checkpoint_shape":[2,3,10],
          "split":[{"dim":2,"axis":"tp","sections":1}]})";
  Manifest m = parseManifest(manifestWith(logits));
  EXPECT_EQ(m.logits, 0);
  EXPECT_EQ(m.args[0].param, "");
  EXPECT_EQ(m.args[0].localElements(), 2 * 3 * 8);
  EXPECT_EQ(parseManifest(manifestWith("")).logits, -1);
  // TP=1: no split.
  EXPECT_EQ(parseManifest(manifestWith(
                              R"({"name":"logits","role":"logits","dtype":"f32",
                                  "global_shape":[2,3,12],"local_shape":[2,3,12],
                                  "checkpoint_shape":[2,3,10],"split":[]})",
                              1))
                .logits,
            0);
  auto err = [](const std::string &text, const std::string &what) {
    const std::string e = manifestError(text);
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  err(manifestWith(logits + "," + replaceFirst(logits, R"("name":"logits")",
                                               R"("name":"logits2")")),
      "more than one arg with role \"logits\"");
  err(manifestWith(replaceFirst(logits, R"("dtype":"f32")", R"("dtype":"i32")")),
      "logits must be f32");
  err(manifestWith(replaceFirst(logits, R"("checkpoint_shape":[2,3,10])",
                                R"("checkpoint_shape":[2,3,9])")),
      "must have global_shape [2, 3, V], checkpoint_shape [2, 3, 10]");
  err(manifestWith(replaceFirst(logits, R"("checkpoint_shape":[2,3,10],)", "")),
      "checkpoint_shape [2, 3, 10]");
  err(manifestWith(
          R"({"name":"logits","role":"logits","dtype":"f32",
              "global_shape":[2,3,16],"local_shape":[1,3,16],
              "checkpoint_shape":[2,3,10],
              "split":[{"dim":0,"axis":"tp","sections":1}]})"),
      "no split but of dim 2");
  err(manifestWith(
          R"({"name":"logits","role":"logits","dtype":"f32",
              "global_shape":[6,16],"local_shape":[6,8],
              "checkpoint_shape":[6,10],
              "split":[{"dim":1,"axis":"tp","sections":1}]})"),
      "must have global_shape [2, 3, V]");
}

namespace {

// A generation step's manifest: batch 2, chunk seq 3, valid vocabulary 10
// padded to 16 and split over tp=2, caches of 2 layers, 4 heads, ctx 8 and
// head width 4 (`extra` args first; `replace` edits the text).
std::string generationManifest(const std::string &extra = "") {
  return "{\"format\":\"megatron-step\",\"version\":" +
         std::to_string(MGT_MANIFEST_VERSION) +
         R"(,"dp":1,"tp":2,"batch":2,"seq":3,"valid_vocab":10,
            "entries":["prefill","decode"],"args":[)" +
         extra + (extra.empty() ? "" : ",") +
         R"({"name":"input_ids","role":"tokens","dtype":"i32",
             "global_shape":[2,3],"local_shape":[2,3]},
            {"name":"next_ids","role":"next_tokens","dtype":"i32",
             "global_shape":[2,1],"local_shape":[2,1]},
            {"name":"positions","role":"positions","dtype":"i32",
             "global_shape":[2],"local_shape":[2]},
            {"name":"last_index","role":"last_index","dtype":"i32",
             "global_shape":[2],"local_shape":[2]},
            {"name":"k_cache","role":"kv_cache","dtype":"f32",
             "global_shape":[2,2,4,8,4],"local_shape":[2,2,2,8,4],
             "split":[{"dim":2,"axis":"tp","sections":1}]},
            {"name":"v_cache","role":"kv_cache","dtype":"f32",
             "global_shape":[2,2,4,8,4],"local_shape":[2,2,2,8,4],
             "split":[{"dim":2,"axis":"tp","sections":1}]},
            {"name":"logits","role":"logits","dtype":"f32",
             "global_shape":[2,16],"local_shape":[2,8],
             "checkpoint_shape":[2,10],
             "split":[{"dim":1,"axis":"tp","sections":1}]}]})";
}

} // namespace

TEST(Manifest, Generation) {
  Manifest m = parseManifest(generationManifest());
  EXPECT_TRUE(m.generates());
  EXPECT_EQ(m.tokens, 0);
  EXPECT_EQ(m.nextTokens, 1);
  EXPECT_EQ(m.positions, 2);
  EXPECT_EQ(m.lastIndex, 3);
  EXPECT_EQ(m.logits, 6);
  EXPECT_EQ(m.targets, -1);
  EXPECT_EQ(m.ctx, 8);
  EXPECT_FALSE(parseManifest(manifestWith("")).generates());
  auto err = [](const std::string &text, const std::string &what) {
    const std::string e = manifestError(text);
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  const std::string g = generationManifest();
  err(replaceFirst(g, R"(["prefill","decode"])", R"(["prefill"])"),
      "a generation step's entries are [\"prefill\", \"decode\"]");
  err(replaceFirst(g, R"("global_shape":[2,1],"local_shape":[2,1])",
                   R"("global_shape":[2,2],"local_shape":[2,2])"),
      "\"next_ids\" (next_tokens) must have global and local shape [2, 1] "
      "and no split");
  err(replaceFirst(g, R"("global_shape":[2,2,4,8,4],"local_shape":[2,2,2,8,4],
             "split":[{"dim":2)",
                   R"("global_shape":[2,2,4,8,4],"local_shape":[1,2,4,8,4],
             "split":[{"dim":0)"),
      "\"k_cache\" (kv_cache) must have global_shape [layers, 2, heads, ctx, "
      "head_dim] with ctx >= seq 3");
  err(replaceFirst(g, R"("global_shape":[2,16],"local_shape":[2,8],
             "checkpoint_shape":[2,10],
             "split":[{"dim":1)",
                   R"("global_shape":[2,3,16],"local_shape":[2,3,8],
             "checkpoint_shape":[2,3,10],
             "split":[{"dim":2)"),
      "\"logits\" (logits) must have global_shape [2, V], checkpoint_shape "
      "[2, 10]");
  err(replaceFirst(g, R"({"name":"positions","role":"positions")",
                   R"({"name":"positions","role":"last_index")"),
      "more than one arg with role \"last_index\"");
  err(generationManifest(
          R"({"name":"targets","role":"targets","dtype":"i32",
              "global_shape":[2,3],"local_shape":[2,3]})"),
      "a generation step has no \"targets\"");
  err(replaceFirst(g, R"("valid_vocab":10)", R"("valid_vocab":16777216)"),
      "valid_vocab 16777216: generation's sampling takes vocabularies below "
      "2^24");
  err(manifestWith(R"({"name":"positions","role":"positions","dtype":"i32",
                       "global_shape":[2],"local_shape":[2]})"),
      "\"positions\" (positions): only a generation step (entries prefill, "
      "decode) takes one");
  err(replaceFirst(g, R"({"name":"k_cache","role":"kv_cache","dtype":"f32")",
                   R"({"name":"k_cache","role":"param","dtype":"f32")"),
      "a generation step needs one arg each with role");
}

TEST(Console, ClockTime) {
  EXPECT_EQ(clockTime(0), "0:00:00");
  EXPECT_EQ(clockTime(59.9), "0:00:59");
  EXPECT_EQ(clockTime(3 * 3600 + 7 * 60 + 5), "3:07:05");
  EXPECT_EQ(clockTime(-2), "0:00:00");
}

// 1000 tokens and 2e9 FLOPs in 100 ms on 4e10 FLOP/s of hardware: 10000
// tokens/s at an MFU of 0.5; without a peak no MFU.
TEST(Console, Rates) {
  const Console withPeak(0, 10, 1000, 2e9, 4e10, /*rank0=*/false);
  EXPECT_DOUBLE_EQ(withPeak.mfu(100.0), 0.5);
  const std::string rates = withPeak.rates(0, 100.0);
  EXPECT_EQ(rates.rfind(" tokens_per_s 10000 mfu 0.500 eta ", 0), 0u)
      << rates;
  const Console noPeak(0, 10, 1000, 2e9, 0, false);
  EXPECT_EQ(noPeak.mfu(100.0), 0.0);
  EXPECT_EQ(noPeak.rates(9, 100.0), " tokens_per_s 10000 eta 0:00:00");
}

TEST(Console, PeakFlops) {
  Manifest cpu = parseManifest(manifestWith("", 1));
  // Two ranks of one thread each on a 2-core node: the main job's share.
  const CpuShare twoRanks{/*threadsPerRank=*/1, /*ranksPerNode=*/2,
                          /*cpusPerNode=*/2};
  Options o;
  EXPECT_EQ(peakFlops(o, cpu, 2, twoRanks), 0.0);
  o.peakFlops = 3e12;
  EXPECT_EQ(peakFlops(o, cpu, 2, twoRanks), 3e12);
  o = Options{};
  o.hardware = ::testing::TempDir() + "/hardware.json";
  std::ofstream(o.hardware)
      << R"({"name": "cpu-2-cores", "cores": 2, "threads": 2,
             "flops_per_second_per_core": 1.5e11,
             "flops_per_second": 2.5e11})";
  // Both cores busy, as when the file was measured: its whole-machine rate.
  EXPECT_EQ(peakFlops(o, cpu, 2, twoRanks), 2.5e11);
  // One rank of one thread uses one core: its rate, not the machine's.
  EXPECT_EQ(peakFlops(o, cpu, 1, CpuShare{1, 1, 2}), 1.5e11);
  // Four single-thread ranks on two cores still have two cores.
  EXPECT_EQ(peakFlops(o, cpu, 4, CpuShare{1, 4, 2}), 2.5e11);
  // Two nodes of two ranks each: twice the machine.
  EXPECT_EQ(peakFlops(o, cpu, 4, twoRanks), 5e11);
  Manifest cuda = cpu;
  cuda.target = MGT_TARGET_CUDA;
  EXPECT_EQ(peakFlops(o, cuda, 8, twoRanks), 2e12); // one GPU's, times ranks
  auto refused = [&](const std::string &text, const CpuShare &share,
                     const std::string &why) {
    std::ofstream(o.hardware) << text;
    try {
      peakFlops(o, cpu, 1, share);
      ADD_FAILURE() << "accepted " << text;
    } catch (const std::runtime_error &e) {
      EXPECT_EQ(std::string(e.what()), "hardware file " + o.hardware + why);
    }
  };
  // A file of before per-core rates: its flops_per_second was one thread's
  // rate taken as the whole job's peak, an MFU twice the real one.
  refused(R"({"name": "cpu-2-cores", "flops_per_second": 2.5e11})", twoRanks,
          ": no positive \"flops_per_second_per_core\" and \"cores\" (a CPU "
          "job's peak is the rate of the cores it runs on; measure them with "
          "bench/cpu/measure_hardware.py)");
  refused(R"({"cores": 64, "flops_per_second_per_core": 1e11})", twoRanks,
          " describes a machine of 64 cores; this one has 2");
  o.hardware = ::testing::TempDir() + "/missing-hardware.json";
  EXPECT_THROW(peakFlops(o, cpu, 1, twoRanks), std::runtime_error);
}

TEST(Threads, EachRankTakesItsShareOfTheNode) {
  EXPECT_EQ(chooseThreads(nullptr, 16, 16, 4), 4);  // torchrun's rule
  EXPECT_EQ(chooseThreads(nullptr, 2, 2, 4), 1);    // never none
  EXPECT_EQ(chooseThreads(nullptr, 1, 2, 2), 1);    // mpirun bound it to one
  EXPECT_EQ(chooseThreads("3", 16, 16, 4), 3);      // OMP_NUM_THREADS rules
  EXPECT_EQ(chooseThreads("0", 8, 8, 2), 4);        // not a thread count
  EXPECT_EQ(chooseThreads("x", 8, 8, 1), 8);
}

TEST(Prompts, TokenIds) {
  EXPECT_EQ(parseTokenIds("1,2, 3 ,40"), (Prompt{1, 2, 3, 40}));
  EXPECT_EQ(parseTokenIds("7"), (Prompt{7}));
  for (const char *bad : {"", "1,", ",1", "1,,2", "x", "-1", "1.5",
                          "99999999999"}) {
    try {
      parseTokenIds(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const std::runtime_error &e) {
      EXPECT_NE(std::string(e.what()).find("is not a token id"),
                std::string::npos);
    }
  }
}

TEST(Prompts, Lines) {
  EXPECT_EQ(promptLines("p", "a\r\nbc\nd"),
            (std::vector<std::string>{"a", "bc", "d"}));
  EXPECT_EQ(promptLines("p", "a\n"), (std::vector<std::string>{"a"}));
  EXPECT_THROW(promptLines("p", ""), std::runtime_error);
  try {
    promptLines("p.txt", "a\n\nb\n");
    ADD_FAILURE() << "accepted an empty line";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(),
                 "prompts file p.txt: line 2 is empty (one prompt per line)");
  }
}

TEST(Prompts, FitTheStep) {
  const Manifest m = parseManifest(generationManifest());
  EXPECT_NO_THROW(checkPrompts({{1, 2, 3}, {9}}, m, 5));
  auto why = [&](const std::vector<Prompt> &p, int64_t maxNew) {
    try {
      checkPrompts(p, m, maxNew);
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(why({{1}, {2}, {3}}, 1),
            "3 prompts, but the step generates 2 sequences at a time "
            "(megatron-compile --generate's batch)");
  EXPECT_EQ(why({{1}, {}}, 1), "prompt 1 has no tokens");
  EXPECT_EQ(why({{1, 10}}, 1),
            "prompt 0's token 1 is 10, outside the model's vocabulary of 10");
  EXPECT_EQ(why({{1, 2, 3, 4}}, 5),
            "prompt 0 has 4 tokens: with --max-new 5 it needs 9 positions, "
            "but the model's context (its KV cache) holds 8");
}

// Chunks of 3 over a context of 8: starts 0, 3, then 5 (the last moved
// back to end at 8).
TEST(Generate, PrefillChunks) {
  EXPECT_EQ(chunkStart(0, 3, 8), 0);
  EXPECT_EQ(chunkStart(1, 3, 8), 3);
  EXPECT_EQ(chunkStart(2, 3, 8), 5);
  EXPECT_EQ(prefillChunks(1, 3, 8), 1);
  EXPECT_EQ(prefillChunks(3, 3, 8), 1);
  EXPECT_EQ(prefillChunks(4, 3, 8), 2);
  EXPECT_EQ(prefillChunks(7, 3, 8), 3);
  EXPECT_EQ(prefillChunks(8, 3, 8), 3);
  EXPECT_EQ(prefillChunks(8, 8, 8), 1);
}

// The noise of a token is a function of (seed, sequence, step, token) alone,
// Gumbel distributed: its mean is the Euler-Mascheroni constant.
TEST(Sampling, GumbelNoise) {
  EXPECT_EQ(gumbelNoise(1, 2, 3, 4), gumbelNoise(1, 2, 3, 4));
  EXPECT_NE(gumbelNoise(1, 2, 3, 4), gumbelNoise(2, 2, 3, 4));
  EXPECT_NE(gumbelNoise(1, 2, 3, 4), gumbelNoise(1, 3, 3, 4));
  EXPECT_NE(gumbelNoise(1, 2, 3, 4), gumbelNoise(1, 2, 4, 4));
  EXPECT_NE(gumbelNoise(1, 2, 3, 4), gumbelNoise(1, 2, 3, 5));
  double sum = 0;
  constexpr int kDraws = 200000;
  for (int v = 0; v < kDraws; ++v) {
    const float g = gumbelNoise(7, 0, 0, v);
    ASSERT_TRUE(std::isfinite(g));
    sum += g;
  }
  // The standard deviation is pi / sqrt(6), the standard error of the mean
  // of 200000 draws 0.0029: 0.01 is 3.5 of them (the draws are fixed).
  EXPECT_NEAR(sum / kDraws, 0.5772156649, 0.01);
}

namespace {

// A parameter drawn from normal(0, std).
Arg param(const std::string &name, std::vector<int64_t> global,
          std::vector<int64_t> ckpt = {}, std::vector<Split> splits = {},
          int64_t tp = 1, double std = 0.02) {
  Arg a{name,   "param", "f32",  global,
        global, ckpt.empty() ? global : ckpt, splits, ""};
  a.localShape = a.slice(tp, 0).localShape();
  a.hasInit = true;
  a.initNormal = true;
  a.initValue = std;
  return a;
}

std::vector<float> initLocal(const Arg &a, int64_t tp, int64_t rank,
                             uint64_t seed) {
  TensorSlice s = a.slice(tp, rank);
  std::vector<float> out(s.localElements(), -7.0f);
  initParam(a, s, seed, out.data());
  return out;
}

double stddev(const std::vector<float> &v) {
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
  }
  const double mean = sum / v.size();
  return std::sqrt(sq / v.size() - mean * mean);
}

} // namespace

TEST(Init, Rules) {
  // The rule is the one the manifest states; none is an error naming the
  // parameter.
  Arg gain = param("norm.gain", {8});
  gain.initNormal = false;
  gain.initValue = 1.0;
  EXPECT_EQ(initRule(gain).kind, InitRule::Constant);
  EXPECT_EQ(initRule(gain).value, 1.0);
  Arg weight = param("proj", {8, 8}, {}, {}, 1, 0.02 / std::sqrt(24.0));
  EXPECT_EQ(initRule(weight).kind, InitRule::Normal);
  EXPECT_DOUBLE_EQ(initRule(weight).value, 0.02 / std::sqrt(24.0));
  Arg unstated = param("mystery", {8});
  unstated.hasInit = false;
  try {
    initRule(unstated);
    ADD_FAILURE() << "no rule accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("no initialisation for parameter "
                                         "\"mystery\""),
              std::string::npos);
  }
}

TEST(Init, Statistics) {
  std::vector<float> w = initLocal(param("wte.weight", {400, 256}), 1, 0, 1);
  EXPECT_NEAR(stddev(w), 0.02, 0.0005);
  double mean = std::accumulate(w.begin(), w.end(), 0.0) / w.size();
  EXPECT_NEAR(mean, 0.0, 0.0002);
  std::vector<float> p = initLocal(
      param("h.0.attn.c_proj.weight", {256, 256}, {}, {}, 1, 0.01), 1, 0, 1);
  EXPECT_NEAR(stddev(p), 0.01, 0.0003);
  auto constant = [](const std::string &name, double value) {
    Arg a = param(name, {64});
    a.initNormal = false;
    a.initValue = value;
    return a;
  };
  for (float x : initLocal(constant("h.0.ln_2.weight", 1.0), 1, 0, 1))
    EXPECT_EQ(x, 1.0f);
  for (float x : initLocal(constant("h.0.attn.c_attn.bias", 0.0), 1, 0, 1))
    EXPECT_EQ(x, 0.0f);
}

TEST(Init, SeedAndNameChangeTheValues) {
  Arg a = param("wpe.weight", {8, 8});
  EXPECT_EQ(initLocal(a, 1, 0, 5), initLocal(a, 1, 0, 5));
  EXPECT_NE(initLocal(a, 1, 0, 5), initLocal(a, 1, 0, 6));
  EXPECT_NE(initLocal(a, 1, 0, 5), initLocal(param("wte.weight", {8, 8}), 1, 0, 5));
}

TEST(Init, SlicesOfTheSameGlobalTensor) {
  // TP=1 (padded to 12 rows) vs TP=2 (padded to 16): the checkpoint rows are
  // identical, the padding rows zero.
  Arg one = param("wte.weight", {12, 4}, {10, 4}, {{0, "tp", 1}}, 1);
  std::vector<float> full = initLocal(one, 1, 0, 42);
  Arg two = param("wte.weight", {16, 4}, {10, 4}, {{0, "tp", 1}}, 2);
  std::vector<float> r0 = initLocal(two, 2, 0, 42), r1 = initLocal(two, 2, 1, 42);
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(r0[i], full[i]);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(r1[i], full[32 + i]);
  for (int i = 8; i < 32; ++i)
    EXPECT_EQ(r1[i], 0.0f);
  for (int i = 40; i < 48; ++i)
    EXPECT_EQ(full[i], 0.0f);
  // Sections: rank r's element (row, local col) is the global (row, col).
  Arg qkv1 = param("h.0.attn.c_attn.weight", {4, 24}, {}, {{1, "tp", 3}}, 1);
  Arg qkv2 = param("h.0.attn.c_attn.weight", {4, 24}, {}, {{1, "tp", 3}}, 2);
  std::vector<float> g = initLocal(qkv1, 1, 0, 9);
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<float> l = initLocal(qkv2, 2, r, 9);
    for (int64_t row = 0; row < 4; ++row)
      for (int64_t c = 0; c < 12; ++c)
        EXPECT_EQ(l[row * 12 + c], g[row * 24 + localToGlobal(c, 24, 2, 3, r)]);
  }
  EXPECT_EQ(g[5], normalValue(9, "h.0.attn.c_attn.weight", 5, 0.02));
}

TEST(Init, EveryElementIsItsOwnCounter) {
  // Runs starting at odd offsets and long (OpenMP) runs give the values of
  // the element-wise definition.
  Arg big = param("wte.weight", {1000, 33}, {999, 33}, {{0, "tp", 1}}, 2);
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<float> l = initLocal(big, 2, r, 3);
    for (int64_t k = 0; k < 500 * 33; ++k) {
      const int64_t g = r * 500 * 33 + k;
      ASSERT_EQ(l[k], g < 999 * 33 ? normalValue(3, "wte.weight", g, 0.02) : 0.0f)
          << k;
    }
  }
  Arg qkv = param("h.0.attn.c_attn.weight", {3, 9}, {}, {{1, "tp", 3}}, 3);
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<float> l = initLocal(qkv, 3, r, 4);
    for (int64_t row = 0; row < 3; ++row)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(l[row * 3 + c],
                  normalValue(4, "h.0.attn.c_attn.weight",
                              row * 9 + localToGlobal(c, 9, 3, 3, r), 0.02));
  }
}

TEST(Options, Parsing) {
  Options o = parseOptions({"s.so", "--data", "t.bin", "--eval-only",
                            "--steps=3", "--seed", "7", "--log", "l.jsonl",
                            "--init-from", "m.safetensors"});
  EXPECT_EQ(o.stepLibrary, "s.so");
  EXPECT_EQ(o.data, "t.bin");
  EXPECT_TRUE(o.evalOnly);
  EXPECT_EQ(o.steps, 3);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.log, "l.jsonl");
  EXPECT_EQ(o.initFrom, "m.safetensors");
  EXPECT_EQ(o.dumpLogits, "");
  EXPECT_EQ(parseOptions({"s.so", "--data", "t", "--eval-only",
                          "--dump-logits", "l.st"})
                .dumpLogits,
            "l.st");
  EXPECT_THROW(parseOptions({"s.so", "--data", "t", "--dump-logits", "l.st"}),
               std::invalid_argument);
  EXPECT_THROW(
      parseOptions({"s.so", "--data", "t", "--eval-only", "--dump-logits="}),
      std::invalid_argument);
  EXPECT_EQ(parseOptions({"s.so", "--data", "t"}).seed, 1337u);
  EXPECT_TRUE(parseOptions({"--help"}).help);
  EXPECT_THROW(parseOptions({"s.so", "--data", "t", "--bogus"}),
               std::invalid_argument);
  EXPECT_THROW(parseOptions({"s.so", "--data"}), std::invalid_argument);
  EXPECT_THROW(parseOptions({"s.so", "--data", "t", "--steps", "0"}),
               std::invalid_argument);
  EXPECT_THROW(parseOptions({"s.so", "--data", "t", "--seed", "-1"}),
               std::invalid_argument);
  EXPECT_THROW(parseOptions({"s.so"}), std::invalid_argument);
  EXPECT_THROW(parseOptions({"--data", "t"}), std::invalid_argument);
  EXPECT_THROW(parseOptions({"a.so", "b.so", "--data", "t"}),
               std::invalid_argument);
}

// A function run takes --entry, --inputs and --outputs together, with no
// option of a model's run.
std::string optionsError(const std::vector<std::string> &args) {
  try {
    parseOptions(args);
  } catch (const std::invalid_argument &e) {
    return e.what();
  }
  return "";
}

TEST(Options, FunctionRun) {
  Options o = parseOptions({"f.so", "--entry", "main", "--inputs=in.st",
                            "--outputs", "out.st", "--collective-timeout",
                            "5"});
  EXPECT_TRUE(o.runsFunction());
  EXPECT_EQ(o.entry, "main");
  EXPECT_EQ(o.inputs, "in.st");
  EXPECT_EQ(o.outputs, "out.st");
  EXPECT_FALSE(parseOptions({"s.so", "--data", "t"}).runsFunction());
  EXPECT_EQ(optionsError({"f.so", "--entry", "main", "--inputs", "in.st"}),
            "--entry, --inputs and --outputs go together (the function, its "
            "arguments, its results)");
  EXPECT_EQ(optionsError({"f.so", "--inputs", "in.st", "--outputs", "o"}),
            "--entry, --inputs and --outputs go together (the function, its "
            "arguments, its results)");
  EXPECT_EQ(optionsError({"f.so", "--entry", "main", "--inputs", "in.st",
                          "--outputs", "o", "--data", "t"}),
            "--data is for a model's step, not a function (--entry)");
  EXPECT_EQ(optionsError({"f.so", "--entry=", "--inputs", "i", "--outputs",
                          "o"}),
            "--entry: empty function name");
}

// "flops": each entry's FLOPs of one call on one rank, for the MFU.
TEST(Manifest, Flops) {
  const std::string m = manifestWith("");
  const std::string withFlops = replaceFirst(
      m, R"("batch":2)", R"("flops":{"forward":1.5e9},"batch":2)");
  EXPECT_EQ(parseManifest(withFlops).flopsOf(MGT_ENTRY_KIND_FORWARD), 1.5e9);
  EXPECT_EQ(parseManifest(m).flopsOf(MGT_ENTRY_KIND_FORWARD), 0.0);
  EXPECT_NE(manifestError(replaceFirst(m, R"("batch":2)",
                                       R"("flops":[1],"batch":2)"))
                .find("\"flops\" must be an object"),
            std::string::npos);
  EXPECT_NE(manifestError(replaceFirst(m, R"("batch":2)",
                                       R"("flops":{"forward":-1},"batch":2)"))
                .find("\"flops\" of \"forward\" must be a non-negative number"),
            std::string::npos);
}

TEST(Options, Generation) {
  Options o = parseOptions({"g.so", "--generate", "--prompt-tokens", "1,2",
                            "--max-new", "5", "--temperature", "0.5",
                            "--top-k", "3", "--top-p", "0.9", "--seed", "4"});
  EXPECT_TRUE(o.generate);
  EXPECT_EQ(o.promptTokens, "1,2");
  EXPECT_EQ(o.maxNew, 5);
  EXPECT_EQ(o.temperature, 0.5);
  EXPECT_EQ(o.topK, 3);
  EXPECT_EQ(o.topP, 0.9);
  EXPECT_EQ(o.seed, 4u);
  EXPECT_EQ(optionsError({"g.so", "--generate"}),
            "--generate takes one of --prompt-tokens, --prompt and "
            "--prompts-file");
  EXPECT_EQ(optionsError({"g.so", "--generate", "--prompt", "a",
                          "--prompts-file", "f"}),
            "--generate takes one of --prompt-tokens, --prompt and "
            "--prompts-file");
  EXPECT_EQ(optionsError({"g.so", "--generate", "--prompt", "a", "--steps",
                          "2"}),
            "--steps is not for --generate");
  EXPECT_EQ(optionsError({"g.so", "--generate", "--prompt", "a", "--top-p",
                          "0"}),
            "--top-p: expected a number in (0, 1], got \"0\"");
  EXPECT_EQ(optionsError({"g.so", "--generate", "--prompt", "a",
                          "--temperature", "1e-39"}),
            "--temperature: 1e-39 is too small to divide by; 0 samples "
            "greedily");
  EXPECT_EQ(optionsError({"g.so", "--generate", "--prompt", "a", "--top-p",
                          "1.5"}),
            "--top-p: expected a number in (0, 1], got \"1.5\"");
  EXPECT_NE(optionsError({"g.so", "--generate", "--prompt", "a",
                          "--tokenizer", "gpt2"})
                .find("gpt2"),
            std::string::npos);
  EXPECT_EQ(optionsError({"g.so", "--generate", "--prompt", "a",
                          "--max-new", "0"}),
            "--max-new: expected an integer >= 1, got \"0\"");
}

TEST(Options, Peak) {
  EXPECT_EQ(parseOptions({"s.so", "--data", "t", "--peak-flops", "1e12"})
                .peakFlops,
            1e12);
  EXPECT_EQ(optionsError({"s.so", "--data", "t", "--peak-flops", "1e12",
                          "--hardware", "h.json"}),
            "--peak-flops and --hardware exclude each other (both give the "
            "peak)");
}

TEST(Options, Training) {
  Options o = parseOptions(
      {"s.so", "--data", "t", "--steps", "10", "--lr", "1e-3", "--beta1",
       "0.8", "--beta2=0.95", "--eps", "1e-6", "--weight-decay", "0.1",
       "--grad-clip", "1", "--lr-schedule", "cosine", "--warmup-steps", "2",
       "--min-lr", "1e-4", "--val-data", "v", "--val-every", "3",
       "--val-steps", "2", "--save", "o.st", "--resume", "r.st",
       "--dump-grads", "g.st", "--collective-timeout", "30",
       "--on-nonfinite", "skip"});
  EXPECT_EQ(o.collectiveTimeout, 30.0);
  EXPECT_TRUE(o.skipNonFinite);
  EXPECT_FALSE(parseOptions({"s.so", "--data", "t", "--on-nonfinite", "stop"})
                   .skipNonFinite);
  EXPECT_THROW(parseOptions({"s.so", "--data", "t", "--on-nonfinite", "go"}),
               std::invalid_argument);
  EXPECT_EQ(o.lr, 1e-3);
  EXPECT_EQ(o.beta1, 0.8);
  EXPECT_EQ(o.beta2, 0.95);
  EXPECT_EQ(o.eps, 1e-6);
  EXPECT_EQ(o.weightDecay, 0.1);
  EXPECT_EQ(o.gradClip, 1.0);
  EXPECT_EQ(o.lrSchedule, "cosine");
  EXPECT_EQ(o.warmupSteps, 2);
  EXPECT_EQ(o.minLr, 1e-4);
  EXPECT_EQ(o.valData, "v");
  EXPECT_EQ(o.valEvery, 3);
  EXPECT_EQ(o.valSteps, 2);
  EXPECT_EQ(o.save, "o.st");
  EXPECT_EQ(o.resume, "r.st");
  EXPECT_EQ(o.dumpGrads, "g.st");
  Options d = parseOptions({"s.so", "--data", "t"});
  EXPECT_EQ(d.lr, 3e-4);
  EXPECT_EQ(d.beta1, 0.9);
  EXPECT_EQ(d.beta2, 0.999);
  EXPECT_EQ(d.eps, 1e-8);
  EXPECT_EQ(d.weightDecay, 0.0);
  EXPECT_EQ(d.gradClip, 0.0);
  EXPECT_EQ(d.lrSchedule, "constant");
  EXPECT_EQ(d.warmupSteps, 0);
  EXPECT_EQ(d.valEvery, 0);
  EXPECT_EQ(d.valSteps, 1);
  for (std::vector<std::string> bad :
       {std::vector<std::string>{"--lr", "-1"},
        {"--lr", "x"},
        {"--lr", "inf"},
        {"--beta1", "1"},
        {"--beta2", "-0.1"},
        {"--eps", "-1"},
        {"--grad-clip", "nan"},
        {"--lr-schedule", "linear"},
        {"--warmup-steps", "-1"},
        {"--val-steps", "0"},
        {"--save", ""},
        {"--eval-only", "--save", "x"},
        {"--eval-only", "--resume", "x"},
        {"--eval-only", "--dump-grads", "x"},
        {"--eval-only", "--val-data", "x"},
        {"--resume", "x", "--init-from", "y"}}) {
    std::vector<std::string> args{"s.so", "--data", "t"};
    args.insert(args.end(), bad.begin(), bad.end());
    EXPECT_THROW(parseOptions(args), std::invalid_argument) << bad[0];
  }
}

// One table says which runs take each option: the parser refuses one a
// run does not take, naming the run, and --help lists every option once.
TEST(Options, EachRunTakesItsOwnOptions) {
  auto refusal = [](std::vector<std::string> args) -> std::string {
    try {
      parseOptions(args);
    } catch (const std::invalid_argument &e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(refusal({"s.so", "--data", "t", "--eval-only", "--lr", "1"}),
            "--lr is for training, not --eval-only");
  EXPECT_EQ(refusal({"s.so", "--data", "t", "--eval-only", "--hardware", "h"}),
            "--hardware is for training, not --eval-only");
  EXPECT_EQ(refusal({"s.so", "--data", "t", "--max-new", "3"}),
            "--max-new needs --generate");
  EXPECT_EQ(refusal({"s.so", "--data", "t", "--dump-logits", "l"}),
            "--dump-logits needs --eval-only");
  EXPECT_EQ(refusal({"s.so", "--generate", "--prompt", "x", "--lr", "1"}),
            "--lr is not for --generate");
  EXPECT_EQ(refusal({"s.so", "--entry", "f", "--inputs", "i", "--outputs",
                     "o", "--seed", "1"}),
            "--seed is for a model's step, not a function (--entry)");
  EXPECT_EQ(refusal({"s.so", "--generate", "--prompt", "x", "--seed", "2",
                     "--collective-timeout", "5"}),
            "accepted");
  const std::string help = usage();
  for (const char *flag : {"--init-from", "--lr", "--save-dir", "--entry",
                           "--prompt-tokens", "--vocab", "--merges"}) {
    const std::string listed = std::string("\n  ") + flag + " ";
    EXPECT_NE(help.find(listed), std::string::npos) << flag;
    EXPECT_EQ(help.find(listed), help.rfind(listed)) << flag << " twice";
  }
  EXPECT_NE(help.find("(also --init-from, --seed and --collective-timeout)"),
            std::string::npos)
      << help;
}

TEST(Options, LearningRate) {
  Options o;
  o.lr = 1e-3;
  o.steps = 10;
  for (int64_t t = 0; t < 10; ++t)
    EXPECT_EQ(learningRate(o, t), 1e-3);
  o.warmupSteps = 4;
  EXPECT_EQ(learningRate(o, 0), 1e-3 * 1 / 4);
  EXPECT_EQ(learningRate(o, 2), 1e-3 * 3 / 4);
  EXPECT_EQ(learningRate(o, 3), 1e-3);
  EXPECT_EQ(learningRate(o, 9), 1e-3);
  o.lrSchedule = "cosine";
  o.minLr = 1e-4;
  EXPECT_EQ(learningRate(o, 1), 1e-3 * 2 / 4);
  EXPECT_EQ(learningRate(o, 4), 1e-3); // cos(0)
  EXPECT_EQ(learningRate(o, 7), 1e-4 + 0.5 * (1e-3 - 1e-4) *
                                           (1.0 + std::cos(M_PI * (3.0 / 6.0))));
  EXPECT_NEAR(learningRate(o, 10), 1e-4, 1e-18); // the horizon: min
  o.warmupSteps = 0;
  EXPECT_EQ(learningRate(o, 0), 1e-3);
  EXPECT_NEAR(learningRate(o, 5), 0.5 * (1e-3 + 1e-4), 1e-18);
}

namespace {

std::string writeTemp(const std::vector<char> &bytes) {
  char path[] = "/tmp/megatron-run-test-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, bytes.data(), bytes.size()),
            static_cast<ssize_t>(bytes.size()));
  close(fd);
  return path;
}

std::vector<char> llmc(const std::vector<uint16_t> &tokens, int32_t count,
                       int32_t version = 1) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = version;
  header[2] = count;
  std::vector<char> out(1024 + 2 * tokens.size());
  std::memcpy(out.data(), header.data(), 1024);
  if (!tokens.empty())
    std::memcpy(out.data() + 1024, tokens.data(), 2 * tokens.size());
  return out;
}

std::string tokenError(const std::vector<char> &bytes, int64_t vocab = 100) {
  std::string path = writeTemp(bytes);
  std::string msg;
  try {
    TokenFile f(path);
    f.validate(2, 3, vocab, 1000);
  } catch (const std::runtime_error &e) {
    msg = e.what();
  }
  unlink(path.c_str());
  return msg;
}

} // namespace

TEST(Tokens, BatchesWrapAround) {
  std::vector<uint16_t> toks(13);
  std::iota(toks.begin(), toks.end(), 20);
  for (bool header : {true, false}) {
    std::vector<char> bytes =
        header ? llmc(toks, 13)
               : std::vector<char>(
                     reinterpret_cast<const char *>(toks.data()),
                     reinterpret_cast<const char *>(toks.data() + 13));
    std::string path = writeTemp(bytes);
    TokenFile f(path);
    EXPECT_EQ(f.isLlmc(), header);
    EXPECT_EQ(f.count(), 13);
    f.validate(2, 3, 100, 1000);
    for (int64_t step : {0, 1, 2, 3, 100}) {
      int32_t in[6], tg[6];
      f.batch(step, 2, 3, 100, in, tg);
      for (int j = 0; j < 6; ++j) {
        EXPECT_EQ(in[j], 20 + (step * 6 + j) % 13) << step << " " << j;
        EXPECT_EQ(tg[j], 20 + (step * 6 + j + 1) % 13) << step << " " << j;
      }
    }
    unlink(path.c_str());
  }
}

TEST(Tokens, Errors) {
  std::vector<uint16_t> toks(13, 1);
  EXPECT_NE(tokenError(llmc(toks, 13, 2)).find("unsupported version 2"),
            std::string::npos);
  EXPECT_NE(tokenError(llmc(toks, 14)).find("it says 14 tokens"),
            std::string::npos);
  EXPECT_NE(tokenError(llmc(std::vector<uint16_t>(6, 1), 6))
                .find("6 tokens, fewer than the 7"),
            std::string::npos);
  toks[11] = 100;
  EXPECT_NE(tokenError(llmc(toks, 13))
                .find("token at position 11 has id 100, which is >= the "
                      "model's valid_vocab 100"),
            std::string::npos);
  EXPECT_NE(tokenError({'a', 'b', 'c'}).find("odd size"), std::string::npos);
  // A vocabulary past 65536 ids (Llama 3's 128,256) wants 32-bit tokens.
  EXPECT_NE(tokenError(llmc(toks, 13), 128256)
                .find("a 16-bit (llm.c gpt-2) token file holds ids up to "
                      "65535, but the model's vocabulary has 128256 ids"),
            std::string::npos);
}

// Llama 3's token files: llm.c's 32-bit layout (magic 20240801, version 7),
// ids past 65535 read whole.
TEST(Tokens, ThirtyTwoBitLayout) {
  std::vector<uint32_t> toks = {128000, 1, 70000, 5, 6, 7, 128255, 9};
  std::vector<int32_t> header(256, 0);
  header[0] = 20240801;
  header[1] = 7;
  header[2] = static_cast<int32_t>(toks.size());
  std::vector<char> bytes(1024 + 4 * toks.size());
  std::memcpy(bytes.data(), header.data(), 1024);
  std::memcpy(bytes.data() + 1024, toks.data(), 4 * toks.size());
  std::string path = writeTemp(bytes);
  TokenFile f(path);
  EXPECT_TRUE(f.isLlmc());
  EXPECT_EQ(f.count(), 8);
  f.validate(2, 3, 128256, 1000);
  int32_t in[6], tg[6];
  f.batch(0, 2, 3, 128256, in, tg);
  EXPECT_EQ(in[0], 128000);
  EXPECT_EQ(in[2], 70000);
  EXPECT_EQ(tg[5], 128255);
  unlink(path.c_str());
  bytes.push_back(0);
  EXPECT_NE(tokenError(bytes, 128256).find("it says 8 tokens"),
            std::string::npos);
}

TEST(InputFile, ReadsAndNamesTheFileInErrors) {
  auto error = [](auto &&fn) {
    try {
      fn();
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string path = writeTemp({'a', 'b', 'c', 'd', 'e'});
  {
    InputFile f("data", path);
    EXPECT_EQ(f.path(), path);
    EXPECT_EQ(f.size(), 5u);
    char buf[3] = {};
    f.readExactly(buf, 3, 2);
    EXPECT_EQ(std::string(buf, 3), "cde");
    f.readExactly(buf, 0, 5);
    EXPECT_EQ(error([&] { f.readExactly(buf, 2, 4, "tensor \"x\": "); }),
              "data " + path + ": tensor \"x\": unexpected end of file");
    EXPECT_EQ(error([&] { f.fail("bad"); }), "data " + path + ": bad");
  }
  unlink(path.c_str());
  EXPECT_EQ(error([&] { InputFile("checkpoint", path); })
                .rfind("checkpoint " + path + ": cannot open: ", 0),
            0u);
  EXPECT_EQ(error([] { InputFile("data", "/tmp"); }),
            "data /tmp: not a regular file");
}

TEST(Safetensors, WriteThenReadSlices) {
  char dir[] = "/tmp/megatron-run-st-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/c.safetensors";
  std::vector<float> w(7 * 4), b(4), s(1);
  std::iota(w.begin(), w.end(), 1.0f);
  std::iota(b.begin(), b.end(), -2.0f);
  s[0] = 0.5f;
  {
    SafetensorsWriter out(path,
                          {{"w", {7, 4}},
                           {"b", {4}},
                           {"optimizer.w.exp_avg", {7, 4}},
                           {"optimizer.w.exp_avg_sq", {7, 4}},
                           {"optimizer.b.exp_avg", {4}},
                           {"optimizer.b.exp_avg_sq", {4}},
                           {"scalar", {}}},
                          {{"step", "12"}, {"format", "megatron-mlir"}},
                          Values::Finite);
    struct stat st;
    EXPECT_EQ(stat((path + ".tmp").c_str(), &st), 0);
    EXPECT_NE(stat(path.c_str(), &st), 0); // nothing at PATH before commit
    out.write(w.data(), 28);
    out.write(b.data(), 4);
    out.write(w.data(), 28);
    out.write(w.data(), 28);
    out.write(b.data(), 4);
    out.write(b.data(), 4);
    EXPECT_THROW(out.commit(), std::logic_error); // "scalar" not written
    out.write(s.data(), 1);
    out.commit();
    EXPECT_NE(stat((path + ".tmp").c_str(), &st), 0);
  }
  std::ifstream f(path, std::ios::binary);
  uint64_t headerLen = 0;
  f.read(reinterpret_cast<char *>(&headerLen), 8);
  EXPECT_EQ(headerLen % 8, 0u);

  Checkpoint c(path, checkpointNamesFor(""));
  EXPECT_EQ(c.metadata().at("step"), "12");
  EXPECT_EQ(c.metadata().at("format"), "megatron-mlir");
  EXPECT_EQ(c.entries().count("optimizer.w.exp_avg"), 1u);
  Arg wa{"w", "param", "f32", {8, 4}, {4, 4}, {7, 4}, {{0, "tp", 1}}};
  for (int64_t r = 0; r < 2; ++r) {
    const TensorSlice sl = wa.slice(2, r);
    std::vector<float> got(16, -1.0f), want(16, -1.0f);
    c.readSlice("optimizer.w.exp_avg_sq", sl, got.data());
    sliceTensor(sl, w.data(), want.data());
    EXPECT_EQ(got, want);
  }
  // The optimizer tensors are ignored by --init-from, required by --resume.
  Manifest m = parseManifest(trainManifest(kTrainArgs));
  EXPECT_THROW(c.checkAgainst(m), std::runtime_error); // "scalar" is extra
  unlink(path.c_str());
  rmdir(dir);
}

TEST(Safetensors, OptimizerTensors) {
  char dir[] = "/tmp/megatron-run-st-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string full = std::string(dir) + "/full.safetensors";
  const std::string weights = std::string(dir) + "/weights.safetensors";
  std::vector<float> w(28, 1.0f), b(4, 2.0f);
  {
    SafetensorsWriter out(full,
                          {{"w", {7, 4}},
                           {"b", {4}},
                           {"optimizer.w.exp_avg", {7, 4}},
                           {"optimizer.w.exp_avg_sq", {7, 4}},
                           {"optimizer.b.exp_avg", {4}},
                           {"optimizer.b.exp_avg_sq", {4}}},
                          {{"step", "3"}}, Values::Finite);
    for (const std::vector<float> *t : {&w, &b, &w, &w, &b, &b})
      out.write(t->data(), static_cast<int64_t>(t->size()));
    out.commit();
    SafetensorsWriter only(weights, {{"w", {7, 4}}, {"b", {4}}}, {},
                           Values::Finite);
    only.write(w.data(), 28);
    only.write(b.data(), 4);
    only.commit();
  }
  Manifest m = parseManifest(trainManifest(kTrainArgs));
  Checkpoint(full, checkpointNamesFor("")).checkAgainst(m, false);
  Checkpoint(full, checkpointNamesFor("")).checkAgainst(m, true);
  Checkpoint(weights, checkpointNamesFor("")).checkAgainst(m, false);
  try {
    Checkpoint(weights, checkpointNamesFor("")).checkAgainst(m, true);
    ADD_FAILURE() << "no error for a file without optimizer state";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "tensor \"optimizer.b.exp_avg\" is missing: --resume needs "
                  "the AdamW state"),
              std::string::npos)
        << e.what();
  }
  unlink(full.c_str());
  unlink(weights.c_str());
  rmdir(dir);
}

// A checkpoint split as Hugging Face publishes large ones: its index maps
// each tensor to one of the files beside it; every way the index can be
// wrong is refused, naming it.
TEST(Safetensors, SplitCheckpointIndex) {
  char dir[] = "/tmp/megatron-run-st-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string folder = dir;
  std::vector<float> w(28, 1.0f), b(4, 2.0f);
  {
    SafetensorsWriter one(folder + "/a.safetensors", {{"w", {7, 4}}}, {},
                          Values::Finite);
    one.write(w.data(), 28);
    one.commit();
    SafetensorsWriter two(folder + "/b.safetensors", {{"b", {4}}}, {},
                          Values::Finite);
    two.write(b.data(), 4);
    two.commit();
  }
  const std::string index = folder + "/model.safetensors.index.json";
  auto errorFor = [&](const std::string &json) {
    std::ofstream(index) << json;
    try {
      Checkpoint(folder, checkpointNamesFor(""));
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(errorFor(R"({"weight_map": {"w": "a.safetensors",
                                         "b": "b.safetensors"}})"),
            "");
  Checkpoint c(folder, checkpointNamesFor(""));
  c.checkAgainst(parseManifest(trainManifest(kTrainArgs)), false);
  EXPECT_NE(c.entries().at("b").shard, c.entries().at("w").shard);
  const std::string at = "checkpoint " + index + ": ";
  EXPECT_EQ(errorFor("[1]"), at + "the index is not a JSON object");
  EXPECT_EQ(errorFor("{}"),
            at + "the index has no \"weight_map\" of tensor -> file");
  EXPECT_EQ(errorFor(R"({"weight_map": {"w": 3}})"),
            at + "weight_map[\"w\"] is not a file name");
  EXPECT_EQ(errorFor(R"({"weight_map": {"w": "../a.safetensors"}})"),
            at + "weight_map[\"w\"] names \"../a.safetensors\", not a file "
                 "beside the index");
  EXPECT_EQ(errorFor(R"({"weight_map": {"w": "a.safetensors",
                                         "b": "a.safetensors"}})"),
            at + "the index puts tensor \"b\" in a.safetensors, which does "
                 "not hold it");
  EXPECT_EQ(errorFor(R"({"weight_map": {"w": "c.safetensors"}})"),
            "checkpoint " + folder + "/c.safetensors: cannot open: No such "
            "file or directory");
  unlink(index.c_str());
  try {
    Checkpoint(folder, checkpointNamesFor(""));
    ADD_FAILURE() << "no error for a folder without a checkpoint";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint " + folder + ": a folder without "
              "model.safetensors.index.json or model.safetensors");
  }
  unlink((folder + "/a.safetensors").c_str());
  unlink((folder + "/b.safetensors").c_str());
  rmdir(dir);
}

TEST(Safetensors, UncommittedOrFailedWritesLeaveNoFile) {
  char dir[] = "/tmp/megatron-run-st-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/x.safetensors";
  struct stat st;
  {
    SafetensorsWriter out(path, {{"a", {2}}}, {}, Values::Finite);
    float a[2] = {1, 2};
    out.write(a, 2);
  } // destroyed without commit
  EXPECT_NE(stat((path + ".tmp").c_str(), &st), 0);
  EXPECT_NE(stat(path.c_str(), &st), 0);
  EXPECT_THROW(SafetensorsWriter(std::string(dir) + "/no/such/dir/x", {}, {},
                                 Values::Any),
               std::runtime_error);
  // Renaming onto a directory fails: the .tmp is removed.
  const std::string sub = std::string(dir) + "/sub";
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  {
    SafetensorsWriter out(sub, {}, {}, Values::Any);
    EXPECT_THROW(out.commit(), std::runtime_error);
  }
  EXPECT_NE(stat((sub + ".tmp").c_str(), &st), 0);
  rmdir(sub.c_str());
  rmdir(dir);
}

TEST(Safetensors, CheckWritableRefusesWhatTheWriterWould) {
  char dir[] = "/tmp/megatron-run-st-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/x.safetensors";
  struct stat st;
  SafetensorsWriter::checkWritable(path);
  EXPECT_NE(stat((path + ".tmp").c_str(), &st), 0); // the probe is gone
  EXPECT_NE(stat(path.c_str(), &st), 0);
  EXPECT_THROW(SafetensorsWriter::checkWritable(std::string(dir) + "/no/x"),
               std::runtime_error);
  try {
    SafetensorsWriter::checkWritable(dir);
    ADD_FAILURE() << "a directory passed";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("it is a directory"),
              std::string::npos)
        << e.what();
  }
  rmdir(dir);
}

TEST(Safetensors, FiniteWriterRefusesNaNAndLeavesNoFile) {
  char dir[] = "/tmp/megatron-run-st-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/x.safetensors";
  const float values[3] = {1.0f, std::nanf(""), 2.0f};
  {
    SafetensorsWriter out(path, {{"w", {3}}}, {}, Values::Finite);
    try {
      out.write(values, 3);
      ADD_FAILURE() << "a NaN was written";
    } catch (const std::runtime_error &e) {
      EXPECT_NE(std::string(e.what()).find("tensor \"w\" element 1 is NaN"),
                std::string::npos)
          << e.what();
    }
  }
  struct stat st;
  EXPECT_NE(stat((path + ".tmp").c_str(), &st), 0);
  EXPECT_NE(stat(path.c_str(), &st), 0);
  {
    SafetensorsWriter out(path, {{"w", {3}}}, {}, Values::Any);
    out.write(values, 3);
    out.commit();
  }
  EXPECT_EQ(stat(path.c_str(), &st), 0);
  unlink(path.c_str());
  rmdir(dir);
}

TEST(Tokens, TokensUsedSaturates) {
  EXPECT_EQ(tokensUsed(1, 2, 3), 7);
  EXPECT_EQ(tokensUsed(3, 2, 3), 19);
  const int64_t most = (INT64_MAX - 1) / 6;
  EXPECT_EQ(tokensUsed(most, 2, 3), most * 6 + 1);
  EXPECT_EQ(tokensUsed(most + 1, 2, 3), INT64_MAX);
  EXPECT_EQ(tokensUsed(INT64_MAX, 1, 1), INT64_MAX);
}

// ---- run()'s phases ------------------------------------------------------

namespace {

// One rank of a made-up mesh, so that the mesh's logic runs in one process:
// the other ranks' share of each collective is invented (their failure flag
// in agree(); in an all-gather, rank r's buffer = this rank's + 1000 * r).
struct FakeMesh {
  int64_t tpSize = 1, rank = 0;
  double timeout = -1; // what the context was created with
  // mrt_suspend_collective_timeout: how deep now, how many times in all.
  int suspendedDepth = 0, suspensions = 0;
  // The other ranks' agree() flags (their maximum): the lowest failing
  // rank's world - r, and 1 when some other rank did not fail.
  float othersFlags[2] = {0, 1};
  const char *createError = nullptr; // mrt_context_create fails with it
  int destroyed = 0;
};
FakeMesh fake;
char fakeContextStorage;

mrt_context *fakeCreate(int64_t, double timeout, char *err, size_t errlen) {
  fake.timeout = timeout;
  if (!fake.createError)
    return reinterpret_cast<mrt_context *>(&fakeContextStorage);
  std::snprintf(err, errlen, "%s", fake.createError);
  return nullptr;
}
void fakeDestroy(mrt_context *) { ++fake.destroyed; }
int64_t fakeAxisRank(const mrt_context *, int axis) {
  return axis == MRT_AXIS_TP ? fake.rank : 0;
}
int64_t fakeAxisSize(const mrt_context *, int axis) {
  return axis == MRT_AXIS_TP ? fake.tpSize : 1;
}
int64_t fakeWorldRank(const mrt_context *) { return fake.rank; }
void fakeAllReduce(mrt_context *, int axis, float *buf, int64_t n, int op) {
  // The other ranks answer agree()'s two flags; the DP axis has this rank
  // alone, and so has a TP of 1 (a sum is the rank's own values).
  if (op == MRT_REDUCE_MAX && axis == MRT_AXIS_TP && n == 2)
    for (int64_t k = 0; k < n; ++k)
      buf[k] = std::max(buf[k], fake.othersFlags[k]);
}
void fakeSuspend(mrt_context *, int suspended) {
  fake.suspendedDepth += suspended ? 1 : -1;
  fake.suspensions += suspended ? 1 : 0;
}
void fakeAllGather(mrt_context *, int axis, const float *in, float *out,
                   int64_t n) {
  EXPECT_EQ(axis, MRT_AXIS_TP);
  for (int64_t r = 0; r < fake.tpSize; ++r)
    for (int64_t k = 0; k < n; ++k)
      out[r * n + k] = in[k] + 1000.0f * r;
}

// A host-only runtime for rank `rank` of TP `tpSize`.
RuntimeApi fakeRuntime(int64_t tpSize, int64_t rank) {
  fake = FakeMesh{};
  fake.tpSize = tpSize;
  fake.rank = rank;
  RuntimeApi rt;
  rt.contextCreate = fakeCreate;
  rt.contextDestroy = fakeDestroy;
  rt.axisRank = fakeAxisRank;
  rt.axisSize = fakeAxisSize;
  rt.worldRank = fakeWorldRank;
  rt.allReduce = fakeAllReduce;
  rt.allGather = fakeAllGather;
  rt.suspendCollectiveTimeout = fakeSuspend;
  return rt;
}

std::unique_ptr<Mesh> fakeMeshOf(const RuntimeApi &rt, const Manifest &m) {
  std::string error;
  std::unique_ptr<Mesh> mesh = Mesh::create(rt, "s.so", m, 600.0, error);
  EXPECT_TRUE(mesh) << error;
  return mesh;
}

TEST(Buffers, AllocatesAStackAsOneBuffer) {
  const Manifest m = parseManifest(manifestWithStacks("[[0, 1]]"));
  ASSERT_EQ(m.stacks, (std::vector<std::vector<int>>{{0, 1}}));
  const RuntimeApi rt = fakeRuntime(1, 0);
  Buffers buffers(rt, m);
  buffers.allocate();
  EXPECT_EQ(buffers.host<float>(1), buffers.host<float>(0) + 4);
  EXPECT_EQ(buffers.stepArgs()[1], static_cast<void *>(buffers.host<float>(1)));
  EXPECT_EQ(buffers.host<float>(1)[3], 0.0f);
}

// A manifest shape whose bytes do not fit 64 bits is refused while parsing;
// one that fits but no memory holds fails naming the argument.
TEST(Buffers, HugeShapesAreNamedNotWrapped) {
  EXPECT_NE(
      manifestError(manifestWith(
                        R"({"name":"w","role":"param","dtype":"f32",
                            "global_shape":[4611686018427387904, 4],
                            "local_shape":[4611686018427387904, 4],"split":[]})",
                        1))
          .find("is too large to count in 64 bits"),
      std::string::npos);
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "ASan aborts on a 2^60-byte request instead of failing it";
#endif
#endif
  const Manifest m = parseManifest(manifestWith(
      R"({"name":"w","role":"param","dtype":"f32",
          "global_shape":[288230376151711744],
          "local_shape":[288230376151711744],"split":[]})",
      1));
  const RuntimeApi rt = fakeRuntime(1, 0);
  Buffers buffers(rt, m);
  try {
    buffers.allocate();
    ADD_FAILURE() << "2^60 bytes were allocated";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "cannot allocate 1152921504606846976 bytes of host memory "
                  "for \"w\""),
              std::string::npos)
        << e.what();
  }
}

// The tokens chooseNextTokens picks from one row of logits at TP=1 over
// `steps` steps (each step draws other noise).
std::set<int32_t> tokensChosen(const std::vector<float> &row, int64_t valid,
                               const SamplingOptions &opt, int steps = 300) {
  const RuntimeApi rt = fakeRuntime(1, 0);
  const std::unique_ptr<Mesh> mesh =
      fakeMeshOf(rt, parseManifest(manifestWith("", 1)));
  const int64_t V = static_cast<int64_t>(row.size());
  const VocabShard shard{{Interval{0, 0, V}}, V, valid};
  std::set<int32_t> chosen;
  for (int step = 0; step < steps; ++step)
    chosen.insert(chooseNextTokens(*mesh, row.data(), shard, 1, opt, step)[0]);
  return chosen;
}

// Logits 0, 1, 2, 3, 3 and padding columns (never chosen, however large):
// probabilities 0.020, 0.053, 0.144, 0.392, 0.392.
const std::vector<float> kRow = {0, 1, 2, 3, 3, 100, 100, 100};

TEST(Sampling, GreedyTakesTheLowestIdOfTheMaximum) {
  EXPECT_EQ(tokensChosen(kRow, 5, {0.0, 0, 1.0, 1}), (std::set<int32_t>{3}));
}

TEST(Sampling, TopKKeepsTiesAtTheThreshold) {
  EXPECT_EQ(tokensChosen(kRow, 5, {1.0, 1, 1.0, 1}),
            (std::set<int32_t>{3, 4}));
  EXPECT_EQ(tokensChosen(kRow, 5, {1.0, 3, 1.0, 1}),
            (std::set<int32_t>{2, 3, 4}));
  EXPECT_EQ(tokensChosen(kRow, 5, {1.0, 0, 1.0, 1}),
            (std::set<int32_t>{0, 1, 2, 3, 4}));
}

// The smallest set of the most likely tokens whose mass reaches p: 0.78 for
// {3, 4}, 0.93 with 2, 0.98 with 1.
TEST(Sampling, TopPKeepsTheSmallestSetThatReachesP) {
  EXPECT_EQ(tokensChosen(kRow, 5, {1.0, 0, 0.5, 1}),
            (std::set<int32_t>{3, 4}));
  EXPECT_EQ(tokensChosen(kRow, 5, {1.0, 0, 0.78, 1}),
            (std::set<int32_t>{3, 4}));
  EXPECT_EQ(tokensChosen(kRow, 5, {1.0, 0, 0.9, 1}),
            (std::set<int32_t>{2, 3, 4}));
  EXPECT_EQ(tokensChosen(kRow, 5, {1.0, 0, 0.95, 1}, 1000),
            (std::set<int32_t>{1, 2, 3, 4}));
  // top-k first, then top-p among what it kept: top-k 3 keeps {2, 3, 4},
  // of whose mass {3, 4} holds 0.84.
  EXPECT_EQ(tokensChosen(kRow, 5, {1.0, 3, 0.8, 1}),
            (std::set<int32_t>{3, 4}));
}

TEST(Sampling, NonFiniteLogitsAreAnError) {
  std::vector<float> row = kRow;
  row[1] = NAN;
  try {
    tokensChosen(row, 5, {0.0, 0, 1.0, 1}, 1);
    ADD_FAILURE() << "chose a token from NaN logits";
  } catch (const std::runtime_error &e) {
    EXPECT_STREQ(e.what(), "the logits of sequence 0 at step 0 are not "
                           "finite: no token to choose");
  }
}

// What agree(failure) returns and prints on stderr.
std::pair<bool, std::string> agreeAndPrint(const Mesh &mesh,
                                           const std::string &failure) {
  testing::internal::CaptureStderr();
  const bool ok = mesh.agree(failure);
  return {ok, testing::internal::GetCapturedStderr()};
}

float fakeForward(mrt_context *, void **) { return 0.0f; }
void fakeTrainStep(mrt_context *, void **, float *) {}

std::string readText(const std::string &path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

std::vector<std::pair<std::string, int>>
namesAndArgs(const std::vector<SavedTensor> &list) {
  std::vector<std::pair<std::string, int>> out;
  for (const SavedTensor &t : list)
    out.push_back({t.name, t.arg});
  return out;
}

} // namespace

TEST(StepLibrary, LoadFailures) {
  EXPECT_EQ(loadFailure("s.so", "s.so: invalid ELF header"),
            "cannot load s.so: s.so: invalid ELF header");
  EXPECT_EQ(loadFailure("s.so", "libcuda.so.1: cannot open shared object "
                                "file: No such file or directory"),
            "s.so was compiled for CUDA (--target=cuda) and needs the NVIDIA "
            "driver (libcuda.so.1), which this machine does not have: it has "
            "no usable GPU (libcuda.so.1: cannot open shared object file: No "
            "such file or directory)");
  // A driver that is there but lacks a symbol is not "no GPU".
  EXPECT_EQ(loadFailure("s.so", "libcuda.so.1: undefined symbol: cuX"),
            "cannot load s.so: libcuda.so.1: undefined symbol: cuX");
  // A bare name is looked up in the current directory, not the library path.
  Options opt;
  opt.stepLibrary = "no-such-step.so";
  RuntimeApi rt;
  StepLibrary step;
  EXPECT_EQ(openStepLibrary(opt, rt, step)
                .rfind("cannot load no-such-step.so: ./no-such-step.so: ", 0),
            0u);
}

TEST(StepLibrary, CapabilityErrors) {
  const Options train = parseOptions({"s.so", "--data", "t"});
  const Options eval = parseOptions({"s.so", "--data", "t", "--eval-only"});
  StepLibrary step;
  step.manifest = parseManifest(trainManifest(kTrainArgs));
  step.forward = fakeForward;
  step.trainStep = fakeTrainStep;
  EXPECT_EQ(capabilityError(train, step, false), "");

  StepLibrary forwardOnly = step;
  forwardOnly.trainStep = nullptr;
  EXPECT_EQ(capabilityError(train, forwardOnly, false),
            "s.so was compiled without --train: compile it with "
            "megatron-compile --train to train, or pass --eval-only to "
            "evaluate it");
  EXPECT_EQ(capabilityError(eval, forwardOnly, false), "");

  StepLibrary unlisted = step;
  unlisted.manifest = parseManifest(manifestWith(kTrainArgs)); // no entries
  EXPECT_EQ(capabilityError(train, unlisted, false),
            "s.so exports mgt_train_step, but its manifest does not list the "
            "entry \"train_step\"");

  EXPECT_EQ(capabilityError(
                parseOptions({"s.so", "--data", "t", "--dump-grads", "g.st"}),
                step, false),
            "--dump-grads: s.so has no gradient outputs; compile with "
            "--export-grads");
  EXPECT_EQ(capabilityError(parseOptions({"s.so", "--data", "t", "--eval-only",
                                          "--dump-logits", "l.st"}),
                            step, false),
            "--dump-logits: s.so has no logits output; compile with "
            "--export-logits");

  StepLibrary device = step;
  device.manifest.args[0].onDevice = true;
  EXPECT_EQ(capabilityError(train, device, false),
            "s.so keeps arguments in device memory, but its runtime has no "
            "mrt_device_alloc");
  EXPECT_EQ(capabilityError(train, device, true), "");

  // A function's library runs with --entry naming its function, a model's
  // without.
  const Options function = parseOptions(
      {"s.so", "--entry", "main", "--inputs", "i", "--outputs", "o"});
  EXPECT_EQ(capabilityError(function, step, false),
            "--entry: s.so is a model's step library, not a function's");
  StepLibrary main;
  main.manifest = parseManifest(functionManifest(kFunctionArgs));
  EXPECT_EQ(capabilityError(function, main, false), "");
  EXPECT_EQ(capabilityError(train, main, false),
            "s.so is a function's library (megatron-compile --entry main); "
            "run it with --entry main --inputs IN --outputs OUT");
  EXPECT_EQ(capabilityError(parseOptions({"s.so", "--entry", "step",
                                          "--inputs", "i", "--outputs", "o"}),
                            main, false),
            "--entry step: s.so exports the function main");
}

TEST(Mesh, AgreeNamesTheLowestFailingRank) {
  const Manifest m = parseManifest(manifestWith("", 4));
  const RuntimeApi rt = fakeRuntime(4, 1); // rank 1 of 4
  std::unique_ptr<Mesh> mesh = fakeMeshOf(rt, m);
  EXPECT_EQ(mesh->tpSize(), 4);
  EXPECT_EQ(mesh->tpRank(), 1);
  EXPECT_FALSE(mesh->rank0());
  using Outcome = std::pair<bool, std::string>;
  EXPECT_EQ(agreeAndPrint(*mesh, ""), Outcome(true, ""));
  fake.othersFlags[0] = 4 - 3; // rank 3 failed too: rank 1 is the lowest
  EXPECT_EQ(agreeAndPrint(*mesh, "boom"),
            Outcome(false, "megatron-run: rank 1: boom\n"));
  fake.othersFlags[0] = 4 - 0; // rank 0 failed: it reports, rank 1 does not
  EXPECT_EQ(agreeAndPrint(*mesh, "boom"), Outcome(false, ""));
  fake.othersFlags[0] = 4 - 2; // only rank 2 failed: no rank goes on
  EXPECT_EQ(agreeAndPrint(*mesh, ""), Outcome(false, ""));
  mesh.reset();
  EXPECT_EQ(fake.destroyed, 1);

  // Every rank failed: said once, by rank 0, without a rank number.
  const RuntimeApi first = fakeRuntime(4, 0);
  std::unique_ptr<Mesh> zero = fakeMeshOf(first, m);
  fake.othersFlags[0] = 4 - 1;
  fake.othersFlags[1] = 0;
  EXPECT_EQ(agreeAndPrint(*zero, "boom"),
            Outcome(false, "megatron-run: boom\n"));
  fake.othersFlags[1] = 1; // rank 2 did not fail: rank 0 names itself
  EXPECT_EQ(agreeAndPrint(*zero, "boom"),
            Outcome(false, "megatron-run: rank 0: boom\n"));
  zero.reset();
  fake.othersFlags[0] = 0;

  // A single rank reports without a rank number.
  const RuntimeApi single = fakeRuntime(1, 0);
  std::unique_ptr<Mesh> one =
      fakeMeshOf(single, parseManifest(manifestWith("", 1)));
  EXPECT_TRUE(one->rank0());
  EXPECT_EQ(agreeAndPrint(*one, "boom"),
            Outcome(false, "megatron-run: boom\n"));
}

TEST(Mesh, CreationFailures) {
  RuntimeApi rt = fakeRuntime(1, 0);
  fake.createError = "megatron-rt: tp_size 2 does not match the 3 MPI ranks";
  Manifest m = parseManifest(manifestWith(""));
  std::string error;
  EXPECT_EQ(Mesh::create(rt, "s.so", m, 12.5, error), nullptr);
  EXPECT_EQ(fake.timeout, 12.5); // --collective-timeout reaches the runtime
  EXPECT_EQ(error, "s.so was compiled for tp=2: launch it as `mpirun -np 2 "
                   "megatron-run ...` (megatron-rt: tp_size 2 does not match "
                   "the 3 MPI ranks)");
  // A CUDA runtime's reason stands alone.
  m.target = MGT_TARGET_CUDA;
  EXPECT_EQ(meshFailure("s.so", m, "megatron-rt: no CUDA device"),
            "s.so: megatron-rt: no CUDA device");
}

TEST(Session, ResumeStep) {
  EXPECT_EQ(resumeStep({{"step", "3"}, {"format", "megatron-mlir"}}, "c.st", 5),
            3);
  EXPECT_EQ(resumeStep({{"step", "0"}}, "c.st", 1), 0);
  auto error = [](const std::map<std::string, std::string> &metadata,
                  int64_t steps) {
    try {
      resumeStep(metadata, "c.st", steps);
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error({}, 5), "checkpoint c.st: no \"step\" in its __metadata__ "
                          "(not written by megatron-run --save?)");
  for (const std::string bad : {"", "x", "3x", "-1", "99999999999999999999"})
    EXPECT_EQ(error({{"step", bad}}, 5), "checkpoint c.st: bad \"step\" \"" +
                                             bad + "\" in its __metadata__");
  EXPECT_EQ(error({{"step", "5"}}, 5),
            "checkpoint c.st is at step 5: nothing to do for --steps 5 "
            "(--steps is the total number of steps, resumed ones included)");
  EXPECT_EQ(error({{"step", "4"}}, 5), "");
}

TEST(Session, Summary) {
  Manifest m = parseManifest(manifestWith(""));
  m.model = "gpt2";
  const std::string model = "s.so: model gpt2, tp 2, batch 2, seq 3, 42 "
                            "parameters on rank 0; weights ";
  const Options eval =
      parseOptions({"s.so", "--data", "t.bin", "--eval-only", "--seed", "7"});
  EXPECT_FALSE(resumes(eval));
  EXPECT_EQ(runSummary(eval, m, 42, 1000, 0),
            model + "the model's init, seed 7; data t.bin (1000 tokens)");
  const Options init = parseOptions(
      {"s.so", "--data", "t.bin", "--init-from", "w.st", "--steps", "4"});
  EXPECT_FALSE(resumes(init));
  EXPECT_EQ(runSummary(init, m, 42, 1000, 0),
            model + "from w.st; data t.bin (1000 tokens); training steps 0..3");
  const Options resume = parseOptions(
      {"s.so", "--data", "t.bin", "--resume", "c.st", "--steps", "10"});
  EXPECT_TRUE(resumes(resume));
  EXPECT_EQ(runSummary(resume, m, 42, 1000, 6),
            model + "and optimizer state from c.st (step 6); data t.bin (1000 "
                    "tokens); training steps 6..9");
}

TEST(StepLoop, NonFiniteStepsStopOrSkip) {
  EXPECT_EQ(nonFiniteStep(3, 2.5f, 0.7f, false), "");
  EXPECT_EQ(nonFiniteStep(7, NAN, 1.0f, false),
            "step 7: the loss is nan and the gradient norm 1: training "
            "stops, and nothing is saved (the step applied no update; "
            "--on-nonfinite skip goes on without it)");
  EXPECT_NE(nonFiniteStep(2, 1.0f, INFINITY, false).find("gradient norm inf"),
            std::string::npos);
  EXPECT_EQ(nonFiniteStep(4, 1.0f, NAN, true, 2),
            "step 4: the loss is 1 and the gradient norm nan: its update is "
            "skipped (2 skipped so far)");
}

// Skipped steps applied no update: AdamW's step count leaves them out.
TEST(StepLoop, HyperparametersCountAppliedUpdates) {
  const Options o = parseOptions({"s.so", "--data", "t", "--steps", "10"});
  EXPECT_EQ(hyperparameters(o, 5)[MGT_HP_STEP], 6.0f);
  EXPECT_EQ(hyperparameters(o, 5, 2)[MGT_HP_STEP], 4.0f);
}

TEST(Session, ResumeSkippedUpdates) {
  EXPECT_EQ(resumeSkipped({{"step", "3"}}, "c.st", 3), 0);
  EXPECT_EQ(resumeSkipped({{"skipped_updates", "2"}}, "c.st", 3), 2);
  auto error = [](const std::map<std::string, std::string> &metadata) {
    try {
      resumeSkipped(metadata, "c.st", 3);
    } catch (const std::runtime_error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error({{"skipped_updates", "x"}}),
            "checkpoint c.st: bad \"skipped_updates\" \"x\" in its __metadata__");
  EXPECT_EQ(error({{"skipped_updates", "4"}}),
            "checkpoint c.st: \"skipped_updates\" 4 exceeds its \"step\" 3");
}

TEST(StepLoop, Hyperparameters) {
  const Options o = parseOptions(
      {"s.so", "--data", "t", "--steps", "10", "--lr", "1e-3", "--beta1",
       "0.8", "--beta2", "0.95", "--eps", "1e-6", "--weight-decay", "0.1",
       "--grad-clip", "1", "--lr-schedule", "cosine", "--warmup-steps", "2",
       "--min-lr", "1e-4", "--seed", "16777300"});
  static_assert(MGT_HP_COUNT == 8, "every slot is checked below");
  for (int64_t step : {0, 1, 2, 5, 9}) {
    const std::array<float, MGT_HP_COUNT> hp = hyperparameters(o, step);
    EXPECT_EQ(hp[MGT_HP_LR], static_cast<float>(learningRate(o, step)));
    EXPECT_EQ(hp[MGT_HP_BETA1], 0.8f);
    EXPECT_EQ(hp[MGT_HP_BETA2], 0.95f);
    EXPECT_EQ(hp[MGT_HP_EPS], 1e-6f);
    EXPECT_EQ(hp[MGT_HP_WEIGHT_DECAY], 0.1f);
    EXPECT_EQ(hp[MGT_HP_GRAD_CLIP], 1.0f);
    EXPECT_EQ(hp[MGT_HP_STEP], static_cast<float>(step + 1)); // 1-based
    EXPECT_EQ(hp[MGT_HP_DROPOUT_SEED], 84.0f); // 2^24 + 84: the low 24 bits
  }
  EXPECT_EQ(hyperparameters(o, 0)[MGT_HP_LR], 1e-3f * 1 / 2); // warmup
}

TEST(Validation, Due) {
  Options o;
  o.steps = 10;
  auto due = [&](int64_t every) {
    o.valEvery = every;
    std::vector<int64_t> at;
    for (int64_t updates = 1; updates <= o.steps; ++updates)
      if (validationDue(o, updates))
        at.push_back(updates);
    return at;
  };
  EXPECT_EQ(due(0), std::vector<int64_t>({10}));
  EXPECT_EQ(due(3), std::vector<int64_t>({3, 6, 9, 10}));
  EXPECT_EQ(due(5), std::vector<int64_t>({5, 10}));
  EXPECT_EQ(due(20), std::vector<int64_t>({10}));
}

TEST(Validation, MeanLoss) {
  auto of = [](std::vector<float> losses) {
    return meanLoss(
        static_cast<int64_t>(losses.size()),
        [losses](int64_t b) -> std::optional<float> { return losses[b]; });
  };
  EXPECT_EQ(of({1.0f, 2.0f, 4.0f}), static_cast<float>(7.0 / 3.0));
  // Summed in double: in f32, 1e8 + 1 would lose the 1.
  EXPECT_EQ(of({1e8f, 1.0f, -1e8f}), static_cast<float>(1.0 / 3.0));
  // A failed batch ends it: no later batch is tried.
  std::vector<int64_t> tried;
  EXPECT_EQ(meanLoss(3,
                     [&](int64_t b) -> std::optional<float> {
                       tried.push_back(b);
                       if (b == 1)
                         return std::nullopt;
                       return 1.0f;
                     }),
            std::nullopt);
  EXPECT_EQ(tried, std::vector<int64_t>({0, 1}));
}

TEST(Save, CheckpointLayout) {
  Manifest m = parseManifest(trainManifest(kTrainArgs));
  m.model = "mock";
  EXPECT_EQ(namesAndArgs(checkpointTensors(m)),
            (std::vector<std::pair<std::string, int>>{
                {"w", 0},
                {"b", 1},
                {"optimizer.w.exp_avg", 2},
                {"optimizer.w.exp_avg_sq", 3},
                {"optimizer.b.exp_avg", 4},
                {"optimizer.b.exp_avg_sq", 5}}));
  Options o = parseOptions({"s.so", "--data", "t", "--steps", "7"});
  o.minLr = 0.1 + 0.2; // needs all 17 digits to read back
  EXPECT_EQ(checkpointMetadata(o, m, 7, 1),
            (Metadata{{"format", "megatron-mlir"},
                      {"step", "7"},
                      {"skipped_updates", "1"},
                      {"model", "mock"},
                      {"lr", "0.0003"},
                      {"beta1", "0.9"},
                      {"beta2", "0.999"},
                      {"eps", "1e-08"},
                      {"weight_decay", "0"},
                      {"grad_clip", "0"},
                      {"lr_schedule", "constant"},
                      {"warmup_steps", "0"},
                      {"min_lr", "0.30000000000000004"},
                      {"steps", "7"}}));
}

TEST(Save, GradientsAndLogits) {
  const Manifest g = parseManifest(trainManifest(kTrainArgsWithGrads));
  EXPECT_EQ(namesAndArgs(gradientTensors(g)),
            (std::vector<std::pair<std::string, int>>{{"w", 7}, {"b", 8}}));
  EXPECT_EQ(gradientMetadata(3),
            (Metadata{{"format", "megatron-mlir"},
                      {"content", "gradients (unclipped) of the loss"},
                      {"step", "3"}}));

  Manifest l = parseManifest(manifestWith(
      R"({"name":"logits","role":"logits","dtype":"f32",
          "global_shape":[2,3,16],"local_shape":[2,3,8],
          "checkpoint_shape":[2,3,10],
          "split":[{"dim":2,"axis":"tp","sections":1}]})"));
  l.model = "mock";
  const std::vector<SafetensorsWriter::Tensor> tensors = logitsTensors(l, 2);
  ASSERT_EQ(tensors.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(tensors[s].name, "logits." + std::to_string(s));
    EXPECT_EQ(tensors[s].shape, std::vector<int64_t>({2, 3, 10}));
  }
  EXPECT_EQ(logitsMetadata(l, 2),
            (Metadata{{"format", "megatron-mlir"},
                      {"content", "logits of mgt_forward; logits.<s> is step "
                                  "s (batch s)"},
                      {"model", "mock"},
                      {"steps", "2"}}));
}

TEST(GlobalWriter, GathersSplitArgsFromEveryRank) {
  const Manifest m = parseManifest(trainManifest(kTrainArgs)); // tp 2
  const RuntimeApi rt = fakeRuntime(2, 0);
  Buffers buffers(rt, m);
  buffers.allocate();
  std::unique_ptr<Mesh> mesh = fakeMeshOf(rt, m);
  float *w = buffers.host<float>(0); // rows 0..3 of w [8, 4]
  std::iota(w, w + 16, 1.0f);
  float *b = buffers.host<float>(1); // replicated
  std::iota(b, b + 4, -2.0f);
  char dir[] = "/tmp/megatron-run-gw-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/g.safetensors";
  ASSERT_TRUE(saveGlobal(*mesh, m, buffers, path, {{"w", 0}, {"b", 1}},
                         {{"step", "1"}}, Values::Finite));
  // While rank 0 writes, the others wait without the collective deadline,
  // and it is back once the file is written.
  EXPECT_GT(fake.suspensions, 0);
  EXPECT_EQ(fake.suspendedDepth, 0);
  Checkpoint c(path, checkpointNamesFor(""));
  EXPECT_EQ(c.metadata().at("step"), "1");
  // w: rows 0..3 are this rank's, rows 4..6 rank 1's (the fake's: + 1000);
  // row 7 is padding, not in the file.
  std::vector<float> got(7 * 4), want(7 * 4);
  Arg whole{"w", "param", "f32", {7, 4}, {7, 4}, {7, 4}, {}};
  c.readSlice("w", whole.slice(1, 0), got.data());
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 4; ++j)
      want[i * 4 + j] = 1.0f + (i % 4) * 4 + j + 1000.0f * (i / 4);
  EXPECT_EQ(got, want);
  std::vector<float> bias(4);
  Arg wholeBias{"b", "param", "f32", {4}, {4}, {4}, {}};
  c.readSlice("b", wholeBias.slice(1, 0), bias.data());
  EXPECT_EQ(bias, std::vector<float>({-2, -1, 0, 1}));
  unlink(path.c_str());

  // Rank 0 cannot create the file: every rank hears of it, nothing is left.
  const std::string bad = std::string(dir) + "/no/such/g.safetensors";
  testing::internal::CaptureStderr();
  EXPECT_FALSE(saveGlobal(*mesh, m, buffers, bad, {{"w", 0}}, {}, Values::Any));
  EXPECT_EQ(
      testing::internal::GetCapturedStderr().rfind("megatron-run: rank 0: ", 0),
      0u);
  rmdir(dir);
}

TEST(Report, StepLines) {
  EXPECT_EQ(evalStepLine(3, 2.5f), "step 3 loss 2.5\n");
  EXPECT_EQ(trainStepLine(0, 2.5f, 0.125f, 3e-4f, 1.5),
            "step 0 loss 2.5 grad_norm 0.125 lr 0.000300000014 ms 1.500\n");
  EXPECT_EQ(validationLine(10, 1.0f), "val step 10 loss 1\n");
  EXPECT_EQ(evalLogLine(3, 2.5f, 2.0, 6),
            "{\"step\":3,\"loss\":2.5,\"ms\":2.000,\"tokens_per_s\":3000.0}\n");
  // Non-finite values are null; so is the rate of a step timed at 0 ms.
  EXPECT_EQ(trainLogLine(0, NAN, INFINITY, 3e-4f, 0.0, 6, 0, 1.25),
            "{\"step\":0,\"loss\":null,\"ms\":0.000,\"tokens_per_s\":null,"
            "\"grad_norm\":null,\"lr\":0.000300000014,"
            "\"exposed_comm_ms\":1.250}\n");
  EXPECT_EQ(validationLogLine(10, 1.5f), "{\"step\":10,\"val_loss\":1.5}\n");
}

TEST(Report, RunLog) {
  RunLog none; // without --log
  none.write("x\n");
  EXPECT_EQ(none.close(), "");

  char dir[] = "/tmp/megatron-run-log-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/run.jsonl";
  {
    RunLog log;
    log.open(path);
    log.write("a\n");
    EXPECT_EQ(readText(path), "a\n"); // flushed at once
    log.write("b\n");
    EXPECT_EQ(log.close(), "");
  }
  EXPECT_EQ(readText(path), "a\nb\n");
  unlink(path.c_str());

  const std::string bad = std::string(dir) + "/no/such/run.jsonl";
  try {
    RunLog log;
    log.open(bad);
    ADD_FAILURE() << "opened " << bad;
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot write log " + bad + ": No such file or directory");
  }
  rmdir(dir);
}
