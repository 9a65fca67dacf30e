// --save-dir: the directory of periodic checkpoints, one file per saved
// step (step-<k>.safetensors, k = updates done, zero-padded so that names
// sort by step), each written atomically by SafetensorsWriter (PATH.tmp,
// fsync, rename, fsync of the directory), so that a run killed at any
// moment leaves every file it had finished intact and at most one .tmp,
// which nothing reads.
#ifndef MEGATRON_RUN_CHECKPOINTDIR_H
#define MEGATRON_RUN_CHECKPOINTDIR_H

#include <cstdint>
#include <string>
#include <vector>

namespace mrun {

// DIR/step-<k>.safetensors.
std::string checkpointInDir(const std::string &dir, int64_t step);

// The steps of the complete checkpoints in `dir`, ascending (.tmp files and
// other names are not checkpoints). Throws std::runtime_error if `dir`
// cannot be read.
std::vector<int64_t> savedSteps(const std::string &dir);

// --resume PATH: PATH itself, or for a directory its latest checkpoint.
// Throws std::runtime_error naming `path` if a directory holds none.
std::string resumeFile(const std::string &path);

// Before a run that saves into `dir` from update `startStep` on: makes `dir`
// if it is not there; throws std::runtime_error naming `dir` if it cannot
// be made or read, or holds a
// checkpoint beyond `startStep` (another run's, which --keep-last would
// keep over this run's and --resume DIR would take).
void checkSaveDirectory(const std::string &dir, int64_t startStep);

// Removes all but the `keep` latest checkpoints of `dir` (keep 0: keeps
// all). Throws std::runtime_error naming a file it cannot remove.
void keepLatest(const std::string &dir, int64_t keep);

} // namespace mrun

#endif // MEGATRON_RUN_CHECKPOINTDIR_H
