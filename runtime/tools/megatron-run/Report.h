// What megatron-run tells the user: messages on stderr, the per-step lines
// rank 0 prints on stdout and the JSON lines of --log.
#ifndef MEGATRON_RUN_REPORT_H
#define MEGATRON_RUN_REPORT_H

#include <cstdint>
#include <cstdio>
#include <string>

namespace mrun {

// "megatron-run: MSG" on stderr (errors and progress notes alike).
void report(const std::string &msg);

// Who sees an error that comes before the ranks can agree (Mesh::agree):
// every rank (one command line, one world size), or every rank of a node
// (the files a node reads, such as the step library).
enum class SeenBy { EveryRank, EveryRankOfANode };

// Reports `msg` so that one copy reaches the user: on the launcher's rank 0
// for SeenBy::EveryRank, on the first rank of each node (naming its rank
// where it is not 0) for SeenBy::EveryRankOfANode. The launcher's
// environment (Open MPI, MPICH/Hydra, Slurm) gives each process its place;
// without one the process is rank 0 of its own. The other ranks print
// nothing and wait a moment before they return, so that mpirun, which ends
// the job at the first failed process, does not end the reporting one first.
void reportOnce(const std::string &msg, SeenBy seenBy);

// `line` on stdout, flushed: the step lines follow the run as it goes.
void printLine(const std::string &line);

// v formatted with fmt, or "null" when it is not finite (JSON has neither
// inf nor nan).
std::string jsonNumber(double v, const char *fmt);

// The stdout lines, '\n' included (README: "step S loss X", ...); a
// training line gets Console::rates before its '\n'.
std::string evalStepLine(int64_t step, float loss);
// --eval-only's last line: "mean loss X over N batch(es)".
std::string evalMeanLine(double meanLoss, int64_t batches);
std::string trainStepLine(int64_t step, float loss, float gradNorm, float lr,
                          double ms);
std::string validationLine(int64_t updates, float loss);

// The --log lines, '\n' included. `ms` is the step entry's time alone;
// `batchTokens` = batch * seq gives "tokens_per_s".
std::string evalLogLine(int64_t step, float loss, double ms,
                        int64_t batchTokens);
// `mfu` > 0 (a peak was given) adds "mfu"; "exposed_comm_ms" is the time
// rank 0 waited for collectives during the step.
std::string trainLogLine(int64_t step, float loss, float gradNorm, float lr,
                         double ms, int64_t batchTokens, double mfu,
                         double exposedCommMs);
std::string validationLogLine(int64_t updates, float loss);

// The --log file (rank 0 only). Each line is flushed as it is written, so
// the log of a run that dies is complete up to its last step.
class RunLog {
public:
  RunLog() = default;
  RunLog(const RunLog &) = delete;
  RunLog &operator=(const RunLog &) = delete;
  ~RunLog(); // a log still open here belongs to a failed run: closed unchecked

  // Creates (truncates) `path`. Throws std::runtime_error "cannot write log
  // PATH: why".
  void open(const std::string &path);
  // Appends `line`; nothing when no log is open.
  void write(const std::string &line);
  // Closes the log: "" when it was written completely (or none was open),
  // else "cannot write log PATH: why".
  std::string close();

private:
  std::string failure() const; // the message for errno
  std::string path_;
  FILE *file_ = nullptr;
};

} // namespace mrun

#endif // MEGATRON_RUN_REPORT_H
