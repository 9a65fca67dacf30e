#include "CheckpointDir.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <memory>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace mrun {
namespace {

const char *const kPrefix = "step-";
const char *const kSuffix = ".safetensors";
const int kDigits = 8;

// The step a checkpoint's file name holds, or -1 for any other name:
// kPrefix, kDigits or more digits (a step past 10^8 has more), kSuffix, what
// checkpointInDir writes.
int64_t stepOfName(const std::string &name) {
  const size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kSuffix);
  if (name.size() < prefix + kDigits + suffix || name.size() > prefix + 18 + suffix ||
      name.compare(0, prefix, kPrefix) != 0 ||
      name.compare(name.size() - suffix, suffix, kSuffix) != 0)
    return -1;
  int64_t step = 0;
  for (size_t i = prefix; i < name.size() - suffix; ++i) {
    if (name[i] < '0' || name[i] > '9')
      return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

std::string checkpointInDir(const std::string &dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof(name), "%s%0*lld%s", kPrefix, kDigits,
                static_cast<long long>(step), kSuffix);
  return dir + "/" + name;
}

std::vector<int64_t> savedSteps(const std::string &dir) {
  std::unique_ptr<DIR, int (*)(DIR *)> d(::opendir(dir.c_str()), ::closedir);
  if (!d)
    throw std::runtime_error("checkpoint directory " + dir +
                             ": cannot read: " + std::strerror(errno));
  std::vector<int64_t> steps;
  while (const dirent *entry = ::readdir(d.get()))
    if (const int64_t step = stepOfName(entry->d_name); step >= 0)
      steps.push_back(step);
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string resumeFile(const std::string &path) {
  if (!isDirectory(path))
    return path;
  const std::vector<int64_t> steps = savedSteps(path);
  if (steps.empty())
    throw std::runtime_error("checkpoint directory " + path +
                             " holds no checkpoint (step-<k>" + kSuffix +
                             ", k of 8 digits or more) to resume from");
  return checkpointInDir(path, steps.back());
}

void checkSaveDirectory(const std::string &dir, int64_t startStep) {
  // A directory not there yet is made, as --save makes its file; its parent
  // must exist. Another rank may make it first.
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    throw std::runtime_error("checkpoint directory " + dir +
                             ": cannot create: " + std::strerror(errno));
  const std::vector<int64_t> steps = savedSteps(dir);
  if (!steps.empty() && steps.back() > startStep)
    throw std::runtime_error(
        "checkpoint directory " + dir + " holds " +
        checkpointInDir(dir, steps.back()) + ", beyond this run's start (step " +
        std::to_string(startStep) +
        "): another run's checkpoints; --resume " + dir +
        " continues that run, or save elsewhere");
}

void keepLatest(const std::string &dir, int64_t keep) {
  if (keep <= 0)
    return;
  std::vector<int64_t> steps = savedSteps(dir);
  for (size_t i = 0; i + keep < steps.size(); ++i) {
    const std::string file = checkpointInDir(dir, steps[i]);
    if (::unlink(file.c_str()) != 0)
      throw std::runtime_error("cannot remove the old checkpoint " + file +
                               ": " + std::strerror(errno));
  }
}

} // namespace mrun
