#include "Options.h"

#include "Tokenizer.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace mrun {

namespace {

int64_t parseInt(const std::string &opt, const std::string &value,
                 int64_t min) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || v < min)
    throw std::invalid_argument(opt + ": expected an integer >= " +
                                std::to_string(min) + ", got \"" + value +
                                "\"");
  return v;
}

uint64_t parseUnsigned(const std::string &opt, const std::string &value) {
  errno = 0;
  char *end = nullptr;
  unsigned long long v = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || value[0] == '-' || *end != '\0' || errno == ERANGE)
    throw std::invalid_argument(opt + ": expected a non-negative integer, "
                                      "got \"" +
                                value + "\"");
  return v;
}

double parseDouble(const std::string &opt, const std::string &value,
                   double min, double below = INFINITY) {
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) ||
      v < min || !(v < below))
    throw std::invalid_argument(
        opt + ": expected a number >= " + std::to_string(min) +
        (std::isfinite(below) ? " and < " + std::to_string(below) : "") +
        ", got \"" + value + "\"");
  return v;
}

// A value the step receives as a float: a double beyond float's range would
// reach it as infinity.
double parseFloat(const std::string &opt, const std::string &value, double min,
                  double below = INFINITY) {
  const double v = parseDouble(opt, value, min, below);
  if (!std::isfinite(static_cast<float>(v)))
    throw std::invalid_argument(opt + ": " + value +
                                " is beyond the range of a float");
  return v;
}

std::string fileName(const std::string &opt, const std::string &value) {
  if (value.empty())
    throw std::invalid_argument(opt + ": empty file name");
  return value;
}

} // namespace

double learningRate(const Options &o, int64_t t) {
  const int64_t W = o.warmupSteps, N = o.steps;
  if (t < W)
    return o.lr * static_cast<double>(t + 1) / static_cast<double>(W);
  if (o.lrSchedule == "constant" || N <= W)
    return o.lr;
  const double ratio =
      static_cast<double>(t - W) / static_cast<double>(N - W);
  return o.minLr + 0.5 * (o.lr - o.minLr) * (1.0 + std::cos(M_PI * ratio));
}

namespace {

// The runs of megatron-run: a model's training step, its evaluation
// (--eval-only), generation (--generate) and a framework's function
// (--entry). Each option names the runs that take it.
enum Run : unsigned {
  kTraining = 1u << 0,
  kEvaluation = 1u << 1,
  kGeneration = 1u << 2,
  kFunction = 1u << 3,
  kModelStep = kTraining | kEvaluation,
  kEveryRun = kModelStep | kGeneration | kFunction,
};

// Where --help lists an option.
enum class Section { Common, Training, Function, Generation };

// One option, as the parser and the usage text both read it: its flag, the
// name of its value in the usage (null: it takes none), the runs that take
// it, its section, its help (lines joined by '\n') and what it sets.
struct OptionSpec {
  const char *flag;
  const char *value;
  unsigned runs;
  Section section;
  const char *help;
  void (*set)(Options &o, const std::string &flag, const std::string &value);
};

using S = const std::string &;

const OptionSpec kOptions[] = {
    {"--init-from", "FILE", kModelStep | kGeneration, Section::Common,
     "initial weights from a global safetensors checkpoint:\n"
     "a file, or a split one's index.json or folder (the\n"
     "model's names, or its family's: Hugging Face GPT-2's\n"
     "or Llama's); each rank reads only its slice",
     [](Options &o, S f, S v) { o.initFrom = fileName(f, v); }},
    {"--seed", "S", kModelStep | kGeneration, Section::Common,
     "without --init-from: the model's initialisation\n"
     "(its tp.init rules) from seed S (default 1337; the\n"
     "same weights for every TP size); the dropout masks'\n"
     "seed (its low 24 bits); with --generate also the\n"
     "sampling's seed",
     [](Options &o, S f, S v) { o.seed = parseUnsigned(f, v); }},
    {"--data", "FILE", kModelStep, Section::Common,
     "tokens: llm.c shard (20240520 header, uint16; 20240801,\n"
     "uint32) or raw uint16\n"
     "(required)",
     [](Options &o, S f, S v) { o.data = fileName(f, v); }},
    {"--eval-only", nullptr, kEvaluation, Section::Common,
     "run the forward pass only (mgt_forward), print the\n"
     "loss of each batch and, last, their mean",
     [](Options &o, S, S) { o.evalOnly = true; }},
    {"--steps", "N", kModelStep, Section::Common,
     "number of batches/steps (default 1); step s uses\n"
     "batch s, wrapping around the end of the data. In\n"
     "training N is the total: after --resume at step k\n"
     "the run does steps k..N-1",
     [](Options &o, S f, S v) { o.steps = parseInt(f, v, 1); }},
    {"--log", "FILE", kModelStep, Section::Common,
     "write one JSON line per step to FILE (rank 0)\n"
     "{\"step\", \"loss\", \"ms\", \"tokens_per_s\"} (training\n"
     "adds \"grad_norm\", \"lr\" and \"exposed_comm_ms\", the time\n"
     "rank 0 waited for collectives; validation {\"step\",\n"
     "\"val_loss\"})",
     [](Options &o, S f, S v) { o.log = fileName(f, v); }},
    {"--dump-logits", "FILE", kEvaluation, Section::Common,
     "with --eval-only: write the global logits of step s\n"
     "as tensor \"logits.<s>\" [batch, seq, valid_vocab] of\n"
     "one safetensors file (STEP.so compiled with\n"
     "--export-logits)",
     [](Options &o, S f, S v) { o.dumpLogits = fileName(f, v); }},
    {"--collective-timeout", "S", kEveryRun, Section::Common,
     "end the job, naming the collective, when one takes\n"
     "longer than S seconds: a rank that stopped answering\n"
     "or died (default 600; 0: wait for ever)",
     [](Options &o, S f, S v) {
       o.collectiveTimeout = parseDouble(f, v, 0.0);
     }},
    {"--help", nullptr, kEveryRun, Section::Common, "show this help",
     [](Options &o, S, S) { o.help = true; }},

    {"--lr", "LR", kTraining, Section::Training,
     "peak learning rate (default 3e-4)",
     [](Options &o, S f, S v) { o.lr = parseFloat(f, v, 0.0); }},
    {"--beta1", "B1", kTraining, Section::Training,
     "AdamW beta1 (default 0.9)",
     [](Options &o, S f, S v) { o.beta1 = parseFloat(f, v, 0.0, 1.0); }},
    {"--beta2", "B2", kTraining, Section::Training,
     "AdamW beta2 (default 0.999)",
     [](Options &o, S f, S v) { o.beta2 = parseFloat(f, v, 0.0, 1.0); }},
    {"--eps", "E", kTraining, Section::Training,
     "AdamW epsilon (default 1e-8)",
     [](Options &o, S f, S v) { o.eps = parseFloat(f, v, 0.0); }},
    {"--weight-decay", "WD", kTraining, Section::Training,
     "AdamW weight decay (default 0)",
     [](Options &o, S f, S v) { o.weightDecay = parseFloat(f, v, 0.0); }},
    {"--grad-clip", "C", kTraining, Section::Training,
     "clip the global gradient norm to C (default 0: off)",
     [](Options &o, S f, S v) { o.gradClip = parseFloat(f, v, 0.0); }},
    {"--lr-schedule", "S", kTraining, Section::Training,
     "constant (default) or cosine",
     [](Options &o, S, S v) {
       if (v != "constant" && v != "cosine")
         throw std::invalid_argument(
             "--lr-schedule: expected constant or cosine, got \"" + v + "\"");
       o.lrSchedule = v;
     }},
    {"--warmup-steps", "W", kTraining, Section::Training,
     "linear warmup lr*(t+1)/W for steps t < W (default 0)",
     [](Options &o, S f, S v) { o.warmupSteps = parseInt(f, v, 0); }},
    {"--min-lr", "R", kTraining, Section::Training,
     "cosine: lr decays to R at step N (default 0):\n"
     "R + 0.5*(lr-R)*(1+cos(pi*(t-W)/(N-W))) for t >= W",
     [](Options &o, S f, S v) { o.minLr = parseFloat(f, v, 0.0); }},
    {"--val-data", "FILE", kTraining, Section::Training,
     "validation tokens: mean mgt_forward loss over batches\n"
     "0..M-1 of FILE, printed \"val step S loss X\" (S =\n"
     "updates done)",
     [](Options &o, S f, S v) { o.valData = fileName(f, v); }},
    {"--val-every", "K", kTraining, Section::Training,
     "validate after every K updates (default 0: only at\n"
     "the end; the end is always validated)",
     [](Options &o, S f, S v) { o.valEvery = parseInt(f, v, 0); }},
    {"--val-steps", "M", kTraining, Section::Training,
     "validation batches (default 1)",
     [](Options &o, S f, S v) { o.valSteps = parseInt(f, v, 1); }},
    {"--save", "FILE", kTraining, Section::Training,
     "after training, write a global safetensors checkpoint\n"
     "(weights, AdamW state \"optimizer.*\", step) to FILE",
     [](Options &o, S f, S v) { o.save = fileName(f, v); }},
    {"--save-every", "K", kTraining, Section::Training,
     "also checkpoint after every K updates, into\n"
     "--save-dir DIR as DIR/step-<k>.safetensors (k =\n"
     "updates done, 8 digits: step-00000100; each\n"
     "written atomically, so a run\n"
     "killed at any moment keeps every finished one)",
     [](Options &o, S f, S v) { o.saveEvery = parseInt(f, v, 1); }},
    {"--save-dir", "DIR", kTraining, Section::Training,
     "where --save-every writes (made if not there; its\n"
     "parent must exist)",
     [](Options &o, S f, S v) { o.saveDir = fileName(f, v); }},
    {"--keep-last", "N", kTraining, Section::Training,
     "with --save-every, keep only the N latest (default:\n"
     "all)",
     [](Options &o, S f, S v) { o.keepLast = parseInt(f, v, 1); }},
    {"--resume", "PATH", kTraining, Section::Training,
     "continue from a checkpoint (a --save file, or the\n"
     "latest in a --save-dir directory): weights, AdamW\n"
     "state and step; the data and the schedule continue\n"
     "at that step (not with --init-from)",
     [](Options &o, S f, S v) { o.resume = fileName(f, v); }},
    {"--dump-grads", "FILE", kTraining, Section::Training,
     "write the global gradients of the first step to FILE\n"
     "(STEP.so compiled with --export-grads)",
     [](Options &o, S f, S v) { o.dumpGrads = fileName(f, v); }},
    {"--on-nonfinite", "A", kTraining, Section::Training,
     "a step whose loss or gradient norm is NaN or\n"
     "infinite applies no update; then stop (default:\n"
     "exit 1, nothing saved) or skip (go on, count it)",
     [](Options &o, S, S v) {
       if (v != "stop" && v != "skip")
         throw std::invalid_argument("--on-nonfinite: unknown action '" + v +
                                     "'; use stop or skip");
       o.skipNonFinite = v == "skip";
     }},
    {"--peak-flops", "F", kTraining, Section::Training,
     "the peak FLOP/s of all the job's hardware: each\n"
     "training line then shows the model FLOPs\n"
     "utilisation \"mfu\" (the step's GEMM and attention\n"
     "FLOPs over all ranks / its time / F)",
     [](Options &o, S f, S v) { o.peakFlops = parseDouble(f, v, 1.0); }},
    {"--hardware", "FILE", kTraining, Section::Training,
     "the peak from a hardware file (bench/cpu/\n"
     "measure_hardware.py writes one): on the CPU the rate\n"
     "of the cores the job's threads use, from its\n"
     "\"flops_per_second_per_core\" (a bf16 step's from\n"
     "\"bf16_flops_per_second_per_core\"); on CUDA one\n"
     "GPU's \"flops_per_second\" times the ranks",
     [](Options &o, S f, S v) { o.hardware = fileName(f, v); }},

    {"--entry", "NAME", kFunction, Section::Function,
     "the function STEP.so exports (its name in the module)",
     [](Options &o, S, S v) {
       if (v.empty())
         throw std::invalid_argument("--entry: empty function name");
       o.entry = v;
     }},
    {"--inputs", "IN", kFunction, Section::Function,
     "safetensors file of its global arguments, named by\n"
     "position arg0, arg1, ...; each rank reads its slice",
     [](Options &o, S f, S v) { o.inputs = fileName(f, v); }},
    {"--outputs", "OUT", kFunction, Section::Function,
     "where rank 0 writes its global results, gathered\n"
     "from the ranks, named result0, result1, ...",
     [](Options &o, S f, S v) { o.outputs = fileName(f, v); }},

    {"--generate", nullptr, kGeneration, Section::Generation,
     "continue prompts (STEP.so compiled with --generate)",
     [](Options &o, S, S) { o.generate = true; }},
    {"--prompt-tokens", "IDS", kGeneration, Section::Generation,
     "one prompt of token ids, \"1,2,3\"",
     [](Options &o, S, S v) {
       if (v.empty())
         throw std::invalid_argument("--prompt-tokens: no token ids");
       o.promptTokens = v;
     }},
    {"--prompt", "TEXT", kGeneration, Section::Generation,
     "one prompt, tokenized by --tokenizer",
     [](Options &o, S, S v) {
       if (v.empty())
         throw std::invalid_argument("--prompt: empty prompt");
       o.prompt = v;
     }},
    {"--prompts-file", "F", kGeneration, Section::Generation,
     "one text prompt per line (up to the step's batch)",
     [](Options &o, S f, S v) { o.promptsFile = fileName(f, v); }},
    {"--max-new", "N", kGeneration, Section::Generation,
     "new tokens per prompt (default 32)",
     [](Options &o, S f, S v) { o.maxNew = parseInt(f, v, 1); }},
    {"--temperature", "T", kGeneration, Section::Generation,
     "0: greedy; else sample from softmax(logits / T)\n"
     "(default 1)",
     [](Options &o, S f, S v) {
       o.temperature = parseDouble(f, v, 0.0);
       // Sampling divides the logits by it in float.
       if (o.temperature > 0 &&
           !std::isfinite(static_cast<float>(1.0 / o.temperature)))
         throw std::invalid_argument("--temperature: " + v +
                                     " is too small to divide by; 0 samples "
                                     "greedily");
     }},
    {"--top-k", "K", kGeneration, Section::Generation,
     "sample among the K most likely tokens (default 0:\n"
     "all)",
     [](Options &o, S f, S v) { o.topK = parseInt(f, v, 0); }},
    {"--top-p", "P", kGeneration, Section::Generation,
     "sample among the most likely tokens whose\n"
     "probabilities first reach P (default 1: all)",
     [](Options &o, S f, S v) {
       o.topP = parseDouble(f, v, 0.0);
       if (o.topP == 0.0 || o.topP > 1.0)
         throw std::invalid_argument(
             "--top-p: expected a number in (0, 1], got \"" + v + "\"");
     }},
    {"--tokenizer", "K", kGeneration, Section::Generation,
     "byte (default), gpt2 (with --vocab and --merges) or hf\n"
     "(with --tokenizer-json)",
     [](Options &o, S, S v) { o.tokenizer.kind = v; }},
    {"--vocab", "FILE", kGeneration, Section::Generation,
     "gpt2: vocab.json (token -> id)",
     [](Options &o, S f, S v) { o.tokenizer.vocab = fileName(f, v); }},
    {"--merges", "FILE", kGeneration, Section::Generation,
     "gpt2: merges.txt (\"a b\" merges in rank order)",
     [](Options &o, S f, S v) { o.tokenizer.merges = fileName(f, v); }},
    {"--tokenizer-json", "FILE", kGeneration, Section::Generation,
     "hf: a Hugging Face tokenizer.json (byte-level BPE)",
     [](Options &o, S f, S v) { o.tokenizer.tokenizerJson = fileName(f, v); }},
};

// What --help says before and after each section's options.
struct SectionText {
  Section section;
  Run run; // the run the section is about
  const char *heading;
  const char *trailer;
};

const SectionText kSections[] = {
    {Section::Common, kEvaluation,
     "usage: [mpirun -np TP] megatron-run STEP.so [options]\n"
     "\n"
     "Runs a training step compiled by megatron-mlir (STEP.so) on TP ranks.\n"
     "\n"
     "options:\n",
     ""},
    {Section::Training, kTraining,
     "training (without --eval-only; STEP.so compiled with --train):\n", ""},
    {Section::Function, kFunction,
     "a framework's function (STEP.so compiled with megatron-compile --entry):\n"
     "  megatron-run STEP.so --entry NAME --inputs IN --outputs OUT\n",
     ""},
    {Section::Generation, kGeneration,
     "generation (STEP.so compiled with megatron-compile --generate):\n"
     "  megatron-run STEP.so --generate [--init-from FILE | --seed S] PROMPT\n",
     "  Rank 0 prints each prompt's text as it grows and, last, one JSON line\n"
     "  {\"generated\", \"prompt_tokens\", \"new_tokens\", \"tokens_per_second\"}.\n"},
};

const char *const kUsageEnd =
    "Rank 0 prints \"step S loss X\" per step (training: \"step S loss X grad_norm\n"
    "G lr L ms M tokens_per_s T [mfu U] eta H:MM:SS\", and a progress bar on\n"
    "stderr where stderr is a terminal); --eval-only ends with \"mean loss X\n"
    "over N batch(es)\". Each rank runs as many OpenMP threads as it has CPUs:\n"
    "those the launcher bound it to, or an equal share of the node's\n"
    "(OMP_NUM_THREADS overrides). Exit status: 0 success, 1 error, 2 usage\n"
    "error.\n";

// "  --flag VALUE      help", the help's later lines under its first.
void appendOption(std::string &usage, const OptionSpec &spec) {
  const size_t helpColumn = 21;
  std::string name = std::string("  ") + spec.flag;
  if (spec.value)
    name += std::string(" ") + spec.value;
  usage += name;
  if (name.size() + 2 > helpColumn)
    usage += "\n" + std::string(helpColumn, ' ');
  else
    usage += std::string(helpColumn - name.size(), ' ');
  for (const char *c = spec.help; *c; ++c) {
    usage += *c;
    if (*c == '\n')
      usage += std::string(helpColumn, ' ');
  }
  usage += "\n";
}

// "  (also --init-from, --seed and --collective-timeout)": what a run
// takes from the other sections, for the sections whose run is not a
// model's step.
std::string alsoTaken(const SectionText &text) {
  if (text.run & kModelStep)
    return "";
  std::vector<std::string> others;
  for (const OptionSpec &spec : kOptions)
    if (spec.section != text.section && (spec.runs & text.run) &&
        std::string(spec.flag) != "--help")
      others.push_back(spec.flag);
  std::string line = "  (also ";
  for (size_t i = 0; i < others.size(); ++i)
    line += (i == 0 ? "" : i + 1 == others.size() ? " and " : ", ") + others[i];
  return line + ")\n";
}

const OptionSpec *findOption(const std::string &flag) {
  for (const OptionSpec &spec : kOptions)
    if (flag == spec.flag)
      return &spec;
  return nullptr;
}

// What runs `o` asks for: a function (any of --entry, --inputs,
// --outputs), generation, evaluation or training.
Run runOf(const Options &o) {
  if (!o.entry.empty() || !o.inputs.empty() || !o.outputs.empty())
    return kFunction;
  if (o.generate)
    return kGeneration;
  return o.evalOnly ? kEvaluation : kTraining;
}

// Why option `spec` does not go with run `run`.
std::string notTakenBy(const OptionSpec &spec, Run run) {
  const std::string flag = spec.flag;
  switch (run) {
  case kFunction:
    return flag + " is for a model's step, not a function (--entry)";
  case kGeneration:
    return flag + " is not for --generate";
  case kEvaluation:
    return flag + " is for training, not --eval-only";
  default:
    return flag + (spec.runs & kEvaluation ? " needs --eval-only"
                                           : " needs --generate");
  }
}

// Every option given goes with the run they ask for.
void checkRun(const Options &o, const std::vector<const OptionSpec *> &given) {
  const Run run = runOf(o);
  if (run == kFunction &&
      (o.entry.empty() || o.inputs.empty() || o.outputs.empty()))
    throw std::invalid_argument("--entry, --inputs and --outputs go together "
                                "(the function, its arguments, its results)");
  for (const OptionSpec *spec : given)
    if (!(spec->runs & run))
      throw std::invalid_argument(notTakenBy(*spec, run));
}

// Generation needs exactly one source of prompts, and a tokenizer for the
// text it prints (and a text prompt): gpt2 with its two files, hf with its
// tokenizer.json, byte with none.
void checkGeneration(const Options &o) {
  const int sources = !o.promptTokens.empty() + !o.prompt.empty() +
                      !o.promptsFile.empty();
  if (sources != 1)
    throw std::invalid_argument("--generate takes one of --prompt-tokens, "
                                "--prompt and --prompts-file");
  try {
    mtok::checkTokenizerChoice(o.tokenizer);
  } catch (const std::exception &e) {
    throw std::invalid_argument(e.what());
  }
}

// What a model's step needs beyond each option's own value.
void checkModelStep(const Options &o) {
  if (o.data.empty())
    throw std::invalid_argument("--data FILE is required");
  if ((o.saveEvery > 0) != !o.saveDir.empty())
    throw std::invalid_argument("--save-every and --save-dir go together "
                                "(how often, and where)");
  if (o.minLr > o.lr) {
    std::ostringstream why;
    why << "--min-lr " << o.minLr << " exceeds --lr " << o.lr
        << " (the cosine schedule decays from --lr to --min-lr)";
    throw std::invalid_argument(why.str());
  }
  if (o.keepLast > 0 && o.saveEvery == 0)
    throw std::invalid_argument("--keep-last needs --save-every");
  if (o.peakFlops > 0 && !o.hardware.empty())
    throw std::invalid_argument("--peak-flops and --hardware exclude each "
                                "other (both give the peak)");
  if (!o.resume.empty() && !o.initFrom.empty())
    throw std::invalid_argument("--resume and --init-from exclude each other "
                                "(--resume loads the weights too)");
}

} // namespace

std::string usage() {
  std::string text;
  for (const SectionText &section : kSections) {
    if (!text.empty())
      text += "\n";
    text += section.heading;
    for (const OptionSpec &spec : kOptions)
      if (spec.section == section.section)
        appendOption(text, spec);
    text += alsoTaken(section);
    text += section.trailer;
  }
  return text + "\n" + kUsageEnd;
}

Options parseOptions(const std::vector<std::string> &args) {
  Options o;
  std::vector<std::string> positional;
  std::vector<const OptionSpec *> given;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0 || arg == "--") {
      if (arg == "--")
        throw std::invalid_argument("unexpected \"--\"");
      if (arg.size() > 1 && arg[0] == '-')
        throw std::invalid_argument("unknown option " + arg);
      positional.push_back(arg);
      continue;
    }
    std::string value;
    bool hasValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      hasValue = true;
    }
    const OptionSpec *spec = findOption(arg);
    if (!spec)
      throw std::invalid_argument("unknown option " + arg);
    if (!spec->value && hasValue)
      throw std::invalid_argument(arg + " takes no value");
    if (spec->value && !hasValue) {
      if (i + 1 >= args.size())
        throw std::invalid_argument(arg + " needs a value");
      value = args[++i];
    }
    spec->set(o, arg, value);
    given.push_back(spec);
  }
  if (o.help)
    return o;
  if (positional.empty())
    throw std::invalid_argument("missing STEP.so");
  if (positional.size() > 1)
    throw std::invalid_argument("unexpected argument \"" + positional[1] +
                                "\"");
  o.stepLibrary = positional[0];
  checkRun(o, given);
  if (o.runsFunction())
    return o;
  if (o.generate)
    checkGeneration(o);
  else
    checkModelStep(o);
  return o;
}

} // namespace mrun
