// megatron-run's command line.
#ifndef MEGATRON_RUN_OPTIONS_H
#define MEGATRON_RUN_OPTIONS_H

#include <cstdint>
#include "Tokenizer.h"

#include <string>
#include <vector>

namespace mrun {

struct Options {
  std::string stepLibrary;
  std::string initFrom; // empty: the model's init rules from seed
  uint64_t seed = 1337;
  std::string data;
  bool evalOnly = false;
  int64_t steps = 1;
  std::string log;
  std::string dumpLogits; // --eval-only: the global logits of every step
  bool help = false;
  // Training (without --eval-only).
  double lr = 3e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0,
         gradClip = 0.0, minLr = 0.0;
  std::string lrSchedule = "constant"; // or "cosine"
  int64_t warmupSteps = 0;
  std::string valData;
  int64_t valEvery = 0, valSteps = 1;
  std::string save, resume, dumpGrads;
  // Periodic checkpoints: after every saveEvery updates into saveDir,
  // keeping the keepLast latest (0: all).
  int64_t saveEvery = 0, keepLast = 0;
  std::string saveDir;
  // Seconds a collective may take before the job ends (0: no limit).
  double collectiveTimeout = 600.0;
  // A step with a non-finite loss or gradient norm (whose update the step
  // did not apply): stop the run, or go on without the update.
  bool skipNonFinite = false;
  // The model FLOPs utilisation's peak: --peak-flops (FLOP/s of all the
  // job's hardware), or a --hardware file (Console.h).
  double peakFlops = 0;
  std::string hardware;
  // A framework's function (--entry): its global inputs and outputs.
  std::string entry, inputs, outputs;
  bool runsFunction() const { return !entry.empty(); }
  // Generation (--generate): the prompts, given one way (token ids
  // "1,2,3", text, or a file of one text prompt per line), and how the new
  // tokens are chosen: temperature 0 is greedy; top-k 0 and top-p 1 keep
  // the whole vocabulary. --seed seeds the sampling (and, without
  // --init-from, the weights).
  bool generate = false;
  std::string promptTokens, prompt, promptsFile;
  int64_t maxNew = 32, topK = 0;
  double temperature = 1.0, topP = 1.0;
  mtok::TokenizerChoice tokenizer;
};

// The learning rate of step t (0-based; steps = --steps N, the schedule's
// horizon), in double, evaluated exactly as written (left to right):
//   t < W:             lr * (t + 1) / W                       (W = warmup)
//   constant, t >= W:  lr
//   cosine, t >= W:    min + 0.5 * (lr - min) * (1 + cos(pi * ((t - W) / (N - W))))
// The step's hyperparameters hold it rounded to f32.
double learningRate(const Options &o, int64_t t);

// --help's text, from the table of options the parser reads: each option
// with the runs that take it (training, --eval-only, --generate, --entry).
std::string usage();

// Parses argv (without argv[0]). "--opt value" and "--opt=value" are both
// accepted. Throws std::invalid_argument (a usage error: exit 2).
Options parseOptions(const std::vector<std::string> &args);

} // namespace mrun

#endif // MEGATRON_RUN_OPTIONS_H
