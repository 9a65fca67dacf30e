// Unit tests of megatron-run's pieces: the slicing rule, the run enumeration,
// manifest validation, the seeded initialisation, options and token batching.
#include "Init.h"
#include "Manifest.h"
#include "Options.h"
#include "Slicing.h"
#include "TokenData.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

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

TEST(Slicing, ContiguousRowSplitIsOneRead) {
  Arg wte{"wte.weight", "param", "f32", {512, 64}, {256, 64}, {512, 64},
          {{0, "tp", 1}}};
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
  return "{\"format\":\"megatron-step\",\"version\":1,\"tp\":" +
         std::to_string(tp) +
         ",\"batch\":2,\"seq\":3,\"valid_vocab\":10,\"args\":[" + arg +
         (arg.empty() ? "" : ",") +
         "{\"name\":\"input_ids\",\"role\":\"input_ids\",\"dtype\":\"i32\","
         "\"global_shape\":[2,3],\"local_shape\":[2,3],\"split\":[]},"
         "{\"name\":\"targets\",\"role\":\"targets\",\"dtype\":\"i32\","
         "\"global_shape\":[2,3],\"local_shape\":[2,3],\"split\":[]}]}";
}

std::string manifestError(const std::string &text) {
  try {
    parseManifest(text);
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
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
          "global_shape": [64], "local_shape": [64], "split": []})"));
  EXPECT_EQ(m.tp, 2);
  ASSERT_EQ(m.args.size(), 5u);
  EXPECT_EQ(m.args[0].checkpointShape, (std::vector<int64_t>{500, 64}));
  EXPECT_EQ(m.args[1].splits[0].sections, 3);
  EXPECT_EQ(m.args[2].checkpointShape, (std::vector<int64_t>{64}));
  EXPECT_EQ(m.inputIds, 3);
  EXPECT_EQ(m.targets, 4);
  EXPECT_EQ(m.numLayers(), 2);
}

TEST(Manifest, RejectsInconsistentShapes) {
  EXPECT_NE(manifestError("not json").find("not JSON"), std::string::npos);
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
                .find("params must be f32"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"grad","dtype":"f32",
                    "global_shape":[8],"local_shape":[8],"split":[]})"))
                .find("unsupported role"),
            std::string::npos);
  EXPECT_NE(manifestError(manifestWith(
                R"({"name":"w","role":"param","dtype":"f32",
                    "global_shape":[8],"local_shape":[4],
                    "split":[{"dim":0,"axis":"dp","sections":1}]})"))
                .find("unsupported split axis"),
            std::string::npos);
  EXPECT_NE(manifestError(
                "{\"format\":\"megatron-step\",\"version\":2,\"tp\":1,"
                "\"batch\":1,\"seq\":1,\"valid_vocab\":1,\"args\":[]}")
                .find("unsupported version 2"),
            std::string::npos);
}

namespace {

Arg param(const std::string &name, std::vector<int64_t> global,
          std::vector<int64_t> ckpt = {}, std::vector<Split> splits = {},
          int64_t tp = 1) {
  Arg a{name, "param", "f32", global, global, ckpt.empty() ? global : ckpt,
        splits};
  a.localShape = a.slice(tp, 0).localShape();
  return a;
}

std::vector<float> initLocal(const Arg &a, int64_t tp, int64_t rank,
                             uint64_t seed, int64_t layers = 12) {
  TensorSlice s = a.slice(tp, rank);
  std::vector<float> out(s.localElements(), -7.0f);
  initParam(a, s, layers, seed, out.data());
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
  auto rule = [](const std::string &name, std::vector<int64_t> shape) {
    return initRule(param(name, shape), 12);
  };
  EXPECT_EQ(rule("h.0.ln_1.weight", {8}).kind, InitRule::Constant);
  EXPECT_EQ(rule("h.0.ln_1.weight", {8}).value, 1.0);
  EXPECT_EQ(rule("h.0.ln_2.weight", {8}).value, 1.0);
  EXPECT_EQ(rule("ln_f.weight", {8}).value, 1.0);
  EXPECT_EQ(rule("ln_f.bias", {8}).value, 0.0);
  EXPECT_EQ(rule("h.3.mlp.c_fc.bias", {8}).value, 0.0);
  EXPECT_EQ(rule("wte.weight", {8, 8}).kind, InitRule::Normal);
  EXPECT_DOUBLE_EQ(rule("h.0.attn.c_attn.weight", {8, 24}).value, 0.02);
  EXPECT_DOUBLE_EQ(rule("h.0.attn.c_proj.weight", {8, 8}).value,
                   0.02 / std::sqrt(24.0));
  EXPECT_DOUBLE_EQ(rule("h.1.mlp.c_proj.weight", {32, 8}).value,
                   0.02 / std::sqrt(24.0));
  EXPECT_THROW(rule("h.0.ln_9.weight", {8}), std::runtime_error);
}

TEST(Init, Statistics) {
  std::vector<float> w = initLocal(param("wte.weight", {400, 256}), 1, 0, 1);
  EXPECT_NEAR(stddev(w), 0.02, 0.0005);
  double mean = std::accumulate(w.begin(), w.end(), 0.0) / w.size();
  EXPECT_NEAR(mean, 0.0, 0.0002);
  std::vector<float> p =
      initLocal(param("h.0.attn.c_proj.weight", {256, 256}), 1, 0, 1, 2);
  EXPECT_NEAR(stddev(p), 0.01, 0.0003);
  for (float x : initLocal(param("h.0.ln_2.weight", {64}), 1, 0, 1))
    EXPECT_EQ(x, 1.0f);
  for (float x : initLocal(param("h.0.attn.c_attn.bias", {64}), 1, 0, 1))
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
}
