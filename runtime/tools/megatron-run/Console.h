// What rank 0 shows while it trains or evaluates: each step's rates
// (tokens/s, and the model FLOPs utilisation against the hardware's peak),
// the time left, and on a terminal a progress bar under the step lines.
#ifndef MEGATRON_RUN_CONSOLE_H
#define MEGATRON_RUN_CONSOLE_H

#include "Manifest.h"
#include "Options.h"
#include "Threads.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace mrun {

// The peak FLOP/s of the hardware the job runs on: --peak-flops, or from a
// --hardware file (bench/cpu/measure_hardware.py writes one). On a CUDA
// step its "flops_per_second" is one GPU's, times the `ranks`. On the CPU
// the peak is that of the cores the job's threads use (`cpus`: threads per
// rank, ranks and CPUs per node, at most every core of each node): the
// file's whole-machine "flops_per_second" where it was measured on that
// many threads, its "flops_per_second_per_core" times the threads
// otherwise. 0 when neither is given. Throws std::runtime_error naming the
// file when it cannot say (no per-core rate, another machine's core count).
double peakFlops(const Options &opt, const Manifest &m, int64_t ranks,
                 const CpuShare &cpus);

// "H:MM:SS" of a non-negative number of seconds (rounded down).
std::string clockTime(double seconds);

class Console {
public:
  // Steps [first, end) of `tokensPerStep` tokens and `flopsPerStep` FLOPs
  // over all ranks; `peak` as peakFlops gives it (0: no MFU). Only rank 0
  // prints.
  Console(int64_t first, int64_t end, int64_t tokensPerStep,
          double flopsPerStep, double peak, bool rank0);
  Console(const Console &) = delete;
  Console &operator=(const Console &) = delete;
  ~Console(); // the bar, if drawn, is cleared

  // The rates of step `step`, whose entry took `ms`, appended to its line:
  // " tokens_per_s T[ mfu F] eta H:MM:SS" (eta from the wall time of the
  // steps so far, validation and checkpoints included).
  std::string rates(int64_t step, double ms) const;
  // The model FLOPs utilisation of a step entry of `ms` (0 without a peak).
  double mfu(double ms) const;

  // `line` on stdout (rank 0), the progress bar redrawn under it with
  // steps up to `step` done.
  void printStep(int64_t step, const std::string &line);
  // Another line (validation), the bar kept as it was.
  void print(const std::string &line);

private:
  double secondsLeft(int64_t step) const;
  void drawBar(int64_t done);
  void clearBar();

  const int64_t first_, end_, tokensPerStep_;
  const double flopsPerStep_, peak_;
  const bool rank0_, terminal_;
  bool barShown_ = false;
  int64_t done_ = 0; // steps the bar shows done
  const std::chrono::steady_clock::time_point start_;
};

} // namespace mrun

#endif // MEGATRON_RUN_CONSOLE_H
