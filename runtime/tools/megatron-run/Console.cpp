#include "Console.h"

#include "FileIO.h"
#include "JsonObject.h"
#include "Report.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <unistd.h>

namespace mrun {

double peakFlops(const Options &opt, const Manifest &m, int64_t ranks) {
  if (opt.peakFlops > 0)
    return opt.peakFlops;
  if (opt.hardware.empty())
    return 0;
  std::string why;
  const std::optional<nlohmann::json> file = parseJsonObject(
      mfile::readFileBytes("hardware file", opt.hardware), why);
  if (!file)
    throw std::runtime_error("hardware file " + opt.hardware + ": " + why);
  const auto rate = file->find("flops_per_second");
  if (rate == file->end() || !rate->is_number() || !(rate->get<double>() > 0))
    throw std::runtime_error("hardware file " + opt.hardware +
                             ": no positive \"flops_per_second\"");
  const double perDevice = rate->get<double>();
  return m.target == MGT_TARGET_CUDA ? perDevice * ranks : perDevice;
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
