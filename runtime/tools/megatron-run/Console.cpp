#include "Console.h"

#include "FileIO.h"
#include "JsonObject.h"
#include "Report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <unistd.h>

namespace mrun {

namespace {

// A hardware file's positive number `name`, or nothing.
std::optional<double> positiveNumber(const nlohmann::json &file,
                                     const char *name) {
  const auto value = file.find(name);
  if (value == file.end() || !value->is_number() ||
      !(value->get<double>() > 0))
    return std::nullopt;
  return value->get<double>();
}

// The CPU job's peak: the rate of the cores its threads use on each node,
// at the GEMM rate of the step's compute type (a bf16 step's GEMMs run at
// the bf16 rate: "bf16_" names its fields).
double cpuPeak(const nlohmann::json &file, const std::string &path,
               int64_t ranks, const CpuShare &cpus, bool bf16) {
  const std::string prefix = bf16 ? "bf16_" : "";
  const std::string perCoreName = prefix + "flops_per_second_per_core",
                    wholeName = prefix + "flops_per_second";
  const std::optional<double> perCore =
      positiveNumber(file, perCoreName.c_str());
  const std::optional<double> cores = positiveNumber(file, "cores");
  if (!perCore || !cores)
    throw std::runtime_error(
        "hardware file " + path + ": no positive \"" + perCoreName +
        "\" and \"cores\" (a " + (bf16 ? "bf16 " : "") +
        "CPU job's peak is the " + (bf16 ? "bf16 GEMM " : "") +
        "rate of the cores it runs on; measure them with "
        "bench/cpu/measure_hardware.py)");
  if (*cores != static_cast<double>(cpus.cpusPerNode))
    throw std::runtime_error(
        "hardware file " + path + " describes a machine of " +
        std::to_string(static_cast<int64_t>(*cores)) + " cores; this one has " +
        std::to_string(cpus.cpusPerNode));
  const int64_t threadsPerNode = std::min(
      cpus.ranksPerNode * cpus.threadsPerRank, cpus.cpusPerNode);
  const int64_t nodes = (ranks + cpus.ranksPerNode - 1) / cpus.ranksPerNode;
  const std::optional<double> measuredThreads = positiveNumber(file, "threads");
  const std::optional<double> whole = positiveNumber(file, wholeName.c_str());
  if (whole && measuredThreads &&
      *measuredThreads == static_cast<double>(threadsPerNode))
    return *whole * nodes;
  return *perCore * threadsPerNode * nodes;
}

} // namespace

double peakFlops(const Options &opt, const Manifest &m, int64_t ranks,
                 const CpuShare &cpus) {
  if (opt.peakFlops > 0)
    return opt.peakFlops;
  if (opt.hardware.empty())
    return 0;
  std::string why;
  const std::optional<nlohmann::json> file = parseJsonObject(
      mfile::readFileBytes("hardware file", opt.hardware), why);
  if (!file)
    throw std::runtime_error("hardware file " + opt.hardware + ": " + why);
  if (m.target != MGT_TARGET_CUDA)
    return cpuPeak(*file, opt.hardware, ranks, cpus, m.computesInBf16());
  const std::optional<double> perDevice =
      positiveNumber(*file, "flops_per_second");
  if (!perDevice)
    throw std::runtime_error("hardware file " + opt.hardware +
                             ": no positive \"flops_per_second\"");
  return *perDevice * ranks;
}

std::string clockTime(double seconds) {
  const long long s = static_cast<long long>(std::max(seconds, 0.0));
  char text[32];
  std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", s / 3600,
                s / 60 % 60, s % 60);
  return text;
}

Console::Console(int64_t first, int64_t end, int64_t tokensPerStep,
                 double flopsPerStep, double peak, bool rank0)
    : first_(first), end_(end), tokensPerStep_(tokensPerStep),
      flopsPerStep_(flopsPerStep), peak_(peak), rank0_(rank0),
      terminal_(rank0 && isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()) {}

Console::~Console() { clearBar(); }

double Console::mfu(double ms) const {
  return peak_ > 0 && ms > 0 ? flopsPerStep_ / (ms / 1e3) / peak_ : 0.0;
}

double Console::secondsLeft(int64_t step) const {
  const double elapsed = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start_)
                             .count();
  const int64_t done = step + 1 - first_;
  return elapsed / static_cast<double>(done) *
         static_cast<double>(end_ - step - 1);
}

std::string Console::rates(int64_t step, double ms) const {
  char text[96];
  std::snprintf(text, sizeof(text), " tokens_per_s %.0f",
                ms > 0 ? tokensPerStep_ / (ms / 1e3) : 0.0);
  std::string out = text;
  if (peak_ > 0) {
    std::snprintf(text, sizeof(text), " mfu %.3f", mfu(ms));
    out += text;
  }
  return out + " eta " + clockTime(secondsLeft(step));
}

void Console::printStep(int64_t step, const std::string &line) {
  done_ = step + 1 - first_;
  print(line);
}

void Console::print(const std::string &line) {
  if (!rank0_)
    return;
  clearBar();
  printLine(line);
  if (done_ > 0)
    drawBar(done_);
}

// "[#######.............] 120/300 eta 0:00:41" on stderr, overwritten by
// the next one.
void Console::drawBar(int64_t done) {
  if (!terminal_)
    return;
  constexpr int kWidth = 30;
  const int64_t total = end_ - first_;
  const int filled =
      total > 0 ? static_cast<int>(kWidth * done / total) : kWidth;
  std::string bar = "\r[" + std::string(filled, '#') +
                    std::string(kWidth - filled, '.') + "] " +
                    std::to_string(done) + "/" + std::to_string(total) +
                    " eta " + clockTime(secondsLeft(first_ + done - 1));
  std::fputs(bar.c_str(), stderr);
  std::fflush(stderr);
  barShown_ = true;
}

void Console::clearBar() {
  if (!barShown_)
    return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  barShown_ = false;
}

} // namespace mrun
