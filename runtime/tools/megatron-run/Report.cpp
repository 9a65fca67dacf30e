#include "Report.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <thread>

namespace mrun {
namespace {

// printf into a string; every line here is far below the buffer's size.
template <typename... Values>
std::string format(const char *fmt, Values... values) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, values...);
  return buf;
}

// The fields every step's log line starts with (no closing brace).
std::string stepLogFields(int64_t step, float loss, double ms,
                          int64_t batchTokens) {
  return "{\"step\":" + std::to_string(step) +
         ",\"loss\":" + jsonNumber(loss, "%.9g") +
         ",\"ms\":" + jsonNumber(ms, "%.3f") + ",\"tokens_per_s\":" +
         jsonNumber(ms > 0 ? batchTokens / (ms / 1000.0) : INFINITY, "%.1f");
}

// The first of the launcher's variables that is set, as a rank (0: none).
long launcherVariable(std::initializer_list<const char *> names) {
  for (const char *name : names)
    if (const char *value = std::getenv(name))
      return std::strtol(value, nullptr, 10);
  return 0;
}

} // namespace

void report(const std::string &msg) {
  // One write per message keeps lines from several ranks from interleaving.
  std::string line = "megatron-run: " + msg + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void reportOnce(const std::string &msg, SeenBy seenBy) {
  const long rank = launcherVariable(
      {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"});
  const long nodeRank = launcherVariable(
      {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
  if (seenBy == SeenBy::EveryRank ? rank == 0 : nodeRank == 0) {
    report(rank == 0 ? msg : "rank " + std::to_string(rank) + ": " + msg);
    return;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
}

void printLine(const std::string &line) {
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

std::string jsonNumber(double v, const char *fmt) {
  if (!std::isfinite(v))
    return "null";
  return format(fmt, v);
}

std::string evalStepLine(int64_t step, float loss) {
  return format("step %lld loss %.9g\n", static_cast<long long>(step), loss);
}

std::string evalMeanLine(double meanLoss, int64_t batches) {
  return format("mean loss %.9g over %lld batch(es)\n", meanLoss,
                static_cast<long long>(batches));
}

std::string trainStepLine(int64_t step, float loss, float gradNorm, float lr,
                          double ms) {
  return format("step %lld loss %.9g grad_norm %.9g lr %.9g ms %.3f\n",
                static_cast<long long>(step), loss, gradNorm, lr, ms);
}

std::string validationLine(int64_t updates, float loss) {
  return format("val step %lld loss %.9g\n", static_cast<long long>(updates),
                loss);
}

std::string evalLogLine(int64_t step, float loss, double ms,
                        int64_t batchTokens) {
  return stepLogFields(step, loss, ms, batchTokens) + "}\n";
}

std::string trainLogLine(int64_t step, float loss, float gradNorm, float lr,
                         double ms, int64_t batchTokens, double mfu,
                         double exposedCommMs) {
  return stepLogFields(step, loss, ms, batchTokens) +
         ",\"grad_norm\":" + jsonNumber(gradNorm, "%.9g") +
         ",\"lr\":" + jsonNumber(lr, "%.9g") +
         (mfu > 0 ? ",\"mfu\":" + jsonNumber(mfu, "%.4f") : "") +
         ",\"exposed_comm_ms\":" + jsonNumber(exposedCommMs, "%.3f") + "}\n";
}

std::string validationLogLine(int64_t updates, float loss) {
  return "{\"step\":" + std::to_string(updates) +
         ",\"val_loss\":" + jsonNumber(loss, "%.9g") + "}\n";
}

RunLog::~RunLog() {
  if (file_)
    std::fclose(file_);
}

void RunLog::open(const std::string &path) {
  path_ = path;
  file_ = std::fopen(path.c_str(), "w");
  if (!file_)
    throw std::runtime_error(failure());
}

void RunLog::write(const std::string &line) {
  if (!file_)
    return;
  std::fputs(line.c_str(), file_);
  std::fflush(file_);
}

std::string RunLog::close() {
  if (!file_)
    return "";
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  return closed ? "" : failure();
}

std::string RunLog::failure() const {
  return "cannot write log " + path_ + ": " + std::strerror(errno);
}

} // namespace mrun
