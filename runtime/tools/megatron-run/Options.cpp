#include "Options.h"

#include "Tokenizer.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace mrun {

const char *const kUsage =
    "usage: [mpirun -np TP] megatron-run STEP.so [options]\n"
    "\n"
    "Runs a training step compiled by megatron-mlir (STEP.so) on TP ranks.\n"
    "\n"
    "options:\n"
    "  --init-from FILE   initial weights from a global safetensors checkpoint\n"
    "                     (the model's parameter names; Hugging Face GPT-2's\n"
    "                     with or without \"transformer.\"); each rank reads\n"
    "                     only its slice\n"
    "  --seed S           without --init-from: the model's initialisation\n"
    "                     (its tp.init rules) from seed S\n"
    "                     (default 1337; the same weights for every TP size)\n"
    "  --data FILE        tokens: llm.c shard (20240520 header) or raw uint16\n"
    "                     (required)\n"
    "  --eval-only        run the forward pass only (mgt_forward) and print\n"
    "                     the loss of each batch\n"
    "  --steps N          number of batches/steps (default 1); step s uses\n"
    "                     batch s, wrapping around the end of the data. In\n"
    "                     training N is the total: after --resume at step k\n"
    "                     the run does steps k..N-1\n"
    "  --log FILE         write one JSON line per step to FILE (rank 0)\n"
    "                     {\"step\", \"loss\", \"ms\", \"tokens_per_s\"} (training\n"
    "                     adds \"grad_norm\", \"lr\" and \"exposed_comm_ms\", the time\n"
    "                     rank 0 waited for collectives; validation {\"step\",\n"
    "                     \"val_loss\"})\n"
    "  --dump-logits FILE with --eval-only: write the global logits of step s\n"
    "                     as tensor \"logits.<s>\" [batch, seq, valid_vocab] of\n"
    "                     one safetensors file (STEP.so compiled with\n"
    "                     --export-logits)\n"
    "\n"
    "training (without --eval-only; STEP.so compiled with --train):\n"
    "  --lr LR            peak learning rate (default 3e-4)\n"
    "  --beta1 B1         AdamW beta1 (default 0.9)\n"
    "  --beta2 B2         AdamW beta2 (default 0.999)\n"
    "  --eps E            AdamW epsilon (default 1e-8)\n"
    "  --weight-decay WD  AdamW weight decay (default 0)\n"
    "  --grad-clip C      clip the global gradient norm to C (default 0: off)\n"
    "  --lr-schedule S    constant (default) or cosine\n"
    "  --warmup-steps W   linear warmup lr*(t+1)/W for steps t < W (default 0)\n"
    "  --min-lr R         cosine: lr decays to R at step N (default 0):\n"
    "                     R + 0.5*(lr-R)*(1+cos(pi*(t-W)/(N-W))) for t >= W\n"
    "  --val-data FILE    validation tokens: mean mgt_forward loss over batches\n"
    "                     0..M-1 of FILE, printed \"val step S loss X\" (S =\n"
    "                     updates done)\n"
    "  --val-every K      validate after every K updates (default 0: only at\n"
    "                     the end; the end is always validated)\n"
    "  --val-steps M      validation batches (default 1)\n"
    "  --save FILE        after training, write a global safetensors checkpoint\n"
    "                     (weights, AdamW state \"optimizer.*\", step) to FILE\n"
    "  --save-every K     also checkpoint after every K updates, into\n"
    "                     --save-dir DIR as DIR/step-<k>.safetensors (k =\n"
    "                     updates done, 8 digits: step-00000100; each\n"
    "                     written atomically, so a run\n"
    "                     killed at any moment keeps every finished one)\n"
    "  --save-dir DIR     where --save-every writes (an existing directory)\n"
    "  --keep-last N      with --save-every, keep only the N latest (default:\n"
    "                     all)\n"
    "  --resume PATH      continue from a checkpoint (a --save file, or the\n"
    "                     latest in a --save-dir directory): weights, AdamW\n"
    "                     state and step; the data and the schedule continue\n"
    "                     at that step (not with --init-from)\n"
    "  --dump-grads FILE  write the global gradients of the first step to FILE\n"
    "                     (STEP.so compiled with --export-grads)\n"
    "  --collective-timeout S\n"
    "                     end the job, naming the collective, when one takes\n"
    "                     longer than S seconds: a rank that stopped answering\n"
    "                     or died (default 600; 0: wait for ever)\n"
    "  --on-nonfinite A   a step whose loss or gradient norm is NaN or\n"
    "                     infinite applies no update; then stop (default:\n"
    "                     exit 1, nothing saved) or skip (go on, count it)\n"
    "  --peak-flops F     the peak FLOP/s of all the job's hardware: each\n"
    "                     training line then shows the model FLOPs\n"
    "                     utilisation \"mfu\" (the step's GEMM and attention\n"
    "                     FLOPs over all ranks / its time / F)\n"
    "  --hardware FILE    the peak from a hardware file (bench/cpu/\n"
    "                     measure_hardware.py writes one): on the CPU the rate\n"
    "                     of the cores the job's threads use, from its\n"
    "                     \"flops_per_second_per_core\"; on CUDA one GPU's\n"
    "                     \"flops_per_second\" times the ranks\n"
    "  --help             show this help\n"

    "\n"
    "a framework's function (STEP.so compiled with megatron-compile --entry):\n"
    "  megatron-run STEP.so --entry NAME --inputs IN --outputs OUT\n"
    "  --entry NAME       the function STEP.so exports (its name in the module)\n"
    "  --inputs IN        safetensors file of its global arguments, named by\n"
    "                     position arg0, arg1, ...; each rank reads its slice\n"
    "  --outputs OUT      where rank 0 writes its global results, gathered\n"
    "                     from the ranks, named result0, result1, ...\n"
    "  (only --collective-timeout goes with them)\n"
    "\n"
    "generation (STEP.so compiled with megatron-compile --generate):\n"
    "  megatron-run STEP.so --generate [--init-from FILE | --seed S] PROMPT\n"
    "  --prompt-tokens IDS  one prompt of token ids, \"1,2,3\"\n"
    "  --prompt TEXT      one prompt, tokenized by --tokenizer\n"
    "  --prompts-file F   one text prompt per line (up to the step's batch)\n"
    "  --max-new N        new tokens per prompt (default 32)\n"
    "  --temperature T    0: greedy; else sample from softmax(logits / T)\n"
    "                     (default 1)\n"
    "  --top-k K          sample among the K most likely tokens (default 0:\n"
    "                     all)\n"
    "  --top-p P          sample among the most likely tokens whose\n"
    "                     probabilities first reach P (default 1: all)\n"
    "  --seed S           the sampling's seed (and, without --init-from, the\n"
    "                     weights'): the same tokens at every TP size\n"
    "  --tokenizer K      byte (default) or gpt2 (with --vocab vocab.json\n"
    "                     --merges merges.txt)\n"
    "  (with --init-from or --seed, and --collective-timeout)\n"
    "  Rank 0 prints each prompt's text as it grows and, last, one JSON line\n"
    "  {\"generated\", \"prompt_tokens\", \"new_tokens\", \"tokens_per_second\"}.\n"
    "\n"
    "Rank 0 prints \"step S loss X\" per step (training: \"step S loss X grad_norm\n"
    "G lr L ms M tokens_per_s T [mfu U] eta H:MM:SS\", and a progress bar on\n"
    "stderr where stderr is a terminal); --eval-only ends with \"mean loss X\n"
    "over N batch(es)\". Each rank runs as many OpenMP threads as it has CPUs:\n"
    "those the launcher bound it to, or an equal share of the node's\n"
    "(OMP_NUM_THREADS overrides). Exit status: 0 success, 1 error, 2 usage\n"
    "error.\n";

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

// The options a function run (--entry) takes besides the step library.
bool takenByFunctionRun(const std::string &option) {
  return option == "--entry" || option == "--inputs" ||
         option == "--outputs" || option == "--collective-timeout";
}

// The options a generation run (--generate) takes.
bool takenByGeneration(const std::string &option) {
  for (const char *taken :
       {"--generate", "--init-from", "--seed", "--prompt-tokens", "--prompt",
        "--prompts-file", "--max-new", "--temperature", "--top-k", "--top-p",
        "--tokenizer", "--vocab", "--merges", "--collective-timeout"})
    if (option == taken)
      return true;
  return false;
}

// A run of another kind than training takes only the options `takes`
// allows; another is an error "<option><why>".
void checkOnlyTaken(const std::vector<std::string> &given,
                    bool (*takes)(const std::string &), const char *why) {
  for (const std::string &option : given)
    if (!takes(option))
      throw std::invalid_argument(option + why);
}

// A function run needs --entry, --inputs and --outputs, and no option of a
// model's run; none of the three goes without the others.
void checkFunctionRun(const Options &o, const std::vector<std::string> &given) {
  const bool any = !o.entry.empty() || !o.inputs.empty() || !o.outputs.empty();
  if (!any)
    return;
  if (o.entry.empty() || o.inputs.empty() || o.outputs.empty())
    throw std::invalid_argument("--entry, --inputs and --outputs go together "
                                "(the function, its arguments, its results)");
  checkOnlyTaken(given, takenByFunctionRun,
                 " is for a model's step, not a function (--entry)");
}

// Generation needs exactly one source of prompts, and a tokenizer for the
// text it prints (and a text prompt): gpt2 with its two files, byte with
// none.
void checkGeneration(const Options &o, const std::vector<std::string> &given) {
  checkOnlyTaken(given, takenByGeneration, " is not for --generate");
  const int sources = !o.promptTokens.empty() + !o.prompt.empty() +
                      !o.promptsFile.empty();
  if (sources != 1)
    throw std::invalid_argument("--generate takes one of --prompt-tokens, "
                                "--prompt and --prompts-file");
  try {
    mtok::checkTokenizerChoice(o.tokenizer, o.vocab, o.merges);
  } catch (const std::exception &e) {
    throw std::invalid_argument(e.what());
  }
}

} // namespace

Options parseOptions(const std::vector<std::string> &args) {
  Options o;
  std::vector<std::string> positional, given;
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
    auto takeValue = [&]() {
      if (hasValue)
        return value;
      if (i + 1 >= args.size())
        throw std::invalid_argument(arg + " needs a value");
      return args[++i];
    };
    auto noValue = [&]() {
      if (hasValue)
        throw std::invalid_argument(arg + " takes no value");
    };
    given.push_back(arg);
    if (arg == "--help") {
      noValue();
      o.help = true;
    } else if (arg == "--entry") {
      o.entry = takeValue();
      if (o.entry.empty())
        throw std::invalid_argument("--entry: empty function name");
    } else if (arg == "--inputs") {
      o.inputs = fileName(arg, takeValue());
    } else if (arg == "--outputs") {
      o.outputs = fileName(arg, takeValue());
    } else if (arg == "--generate") {
      noValue();
      o.generate = true;
    } else if (arg == "--prompt-tokens") {
      o.promptTokens = takeValue();
      if (o.promptTokens.empty())
        throw std::invalid_argument("--prompt-tokens: no token ids");
    } else if (arg == "--prompt") {
      o.prompt = takeValue();
      if (o.prompt.empty())
        throw std::invalid_argument("--prompt: empty prompt");
    } else if (arg == "--prompts-file") {
      o.promptsFile = fileName(arg, takeValue());
    } else if (arg == "--max-new") {
      o.maxNew = parseInt(arg, takeValue(), 1);
    } else if (arg == "--temperature") {
      const std::string value = takeValue();
      o.temperature = parseDouble(arg, value, 0.0);
      // Sampling divides the logits by it in float.
      if (o.temperature > 0 &&
          !std::isfinite(static_cast<float>(1.0 / o.temperature)))
        throw std::invalid_argument("--temperature: " + value +
                                    " is too small to divide by; 0 samples "
                                    "greedily");
    } else if (arg == "--top-k") {
      o.topK = parseInt(arg, takeValue(), 0);
    } else if (arg == "--top-p") {
      const std::string value = takeValue();
      o.topP = parseDouble(arg, value, 0.0);
      if (o.topP == 0.0 || o.topP > 1.0)
        throw std::invalid_argument("--top-p: expected a number in (0, 1], "
                                    "got \"" + value + "\"");
    } else if (arg == "--tokenizer") {
      o.tokenizer = takeValue();
    } else if (arg == "--vocab") {
      o.vocab = fileName(arg, takeValue());
    } else if (arg == "--merges") {
      o.merges = fileName(arg, takeValue());
    } else if (arg == "--peak-flops") {
      o.peakFlops = parseDouble(arg, takeValue(), 1.0);
    } else if (arg == "--hardware") {
      o.hardware = fileName(arg, takeValue());
    } else if (arg == "--eval-only") {
      noValue();
      o.evalOnly = true;
    } else if (arg == "--init-from") {
      o.initFrom = fileName(arg, takeValue());
    } else if (arg == "--seed") {
      o.seed = parseUnsigned(arg, takeValue());
    } else if (arg == "--data") {
      o.data = fileName(arg, takeValue());
    } else if (arg == "--steps") {
      o.steps = parseInt(arg, takeValue(), 1);
    } else if (arg == "--log") {
      o.log = fileName(arg, takeValue());
    } else if (arg == "--lr") {
      o.lr = parseFloat(arg, takeValue(), 0.0);
    } else if (arg == "--beta1") {
      o.beta1 = parseFloat(arg, takeValue(), 0.0, 1.0);
    } else if (arg == "--beta2") {
      o.beta2 = parseFloat(arg, takeValue(), 0.0, 1.0);
    } else if (arg == "--eps") {
      o.eps = parseFloat(arg, takeValue(), 0.0);
    } else if (arg == "--weight-decay") {
      o.weightDecay = parseFloat(arg, takeValue(), 0.0);
    } else if (arg == "--grad-clip") {
      o.gradClip = parseFloat(arg, takeValue(), 0.0);
    } else if (arg == "--min-lr") {
      o.minLr = parseFloat(arg, takeValue(), 0.0);
    } else if (arg == "--lr-schedule") {
      o.lrSchedule = takeValue();
      if (o.lrSchedule != "constant" && o.lrSchedule != "cosine")
        throw std::invalid_argument("--lr-schedule: expected constant or "
                                    "cosine, got \"" +
                                    o.lrSchedule + "\"");
    } else if (arg == "--warmup-steps") {
      o.warmupSteps = parseInt(arg, takeValue(), 0);
    } else if (arg == "--val-data") {
      o.valData = fileName(arg, takeValue());
    } else if (arg == "--val-every") {
      o.valEvery = parseInt(arg, takeValue(), 0);
    } else if (arg == "--val-steps") {
      o.valSteps = parseInt(arg, takeValue(), 1);
    } else if (arg == "--save") {
      o.save = fileName(arg, takeValue());
    } else if (arg == "--on-nonfinite") {
      const std::string action = takeValue();
      if (action != "stop" && action != "skip")
        throw std::invalid_argument("--on-nonfinite: unknown action '" +
                                    action + "'; use stop or skip");
      o.skipNonFinite = action == "skip";
    } else if (arg == "--collective-timeout") {
      o.collectiveTimeout = parseDouble(arg, takeValue(), 0.0);
    } else if (arg == "--save-every") {
      o.saveEvery = parseInt(arg, takeValue(), 1);
    } else if (arg == "--save-dir") {
      o.saveDir = fileName(arg, takeValue());
    } else if (arg == "--keep-last") {
      o.keepLast = parseInt(arg, takeValue(), 1);
    } else if (arg == "--resume") {
      o.resume = fileName(arg, takeValue());
    } else if (arg == "--dump-grads") {
      o.dumpGrads = fileName(arg, takeValue());
    } else if (arg == "--dump-logits") {
      o.dumpLogits = fileName(arg, takeValue());
    } else {
      throw std::invalid_argument("unknown option " + arg);
    }
  }
  if (o.help)
    return o;
  if (positional.empty())
    throw std::invalid_argument("missing STEP.so");
  if (positional.size() > 1)
    throw std::invalid_argument("unexpected argument \"" + positional[1] +
                                "\"");
  o.stepLibrary = positional[0];
  checkFunctionRun(o, given);
  if (o.runsFunction())
    return o;
  if (o.generate) {
    checkGeneration(o, given);
    return o;
  }
  if (o.data.empty())
    throw std::invalid_argument("--data FILE is required");
  if (o.evalOnly) {
    for (const auto &[opt, value] :
         {std::pair<const char *, const std::string *>{"--save", &o.save},
          {"--resume", &o.resume},
          {"--save-dir", &o.saveDir},
          {"--dump-grads", &o.dumpGrads},
          {"--val-data", &o.valData}})
      if (!value->empty())
        throw std::invalid_argument(std::string(opt) +
                                    " is for training, not --eval-only");
  }
  if (!o.evalOnly && !o.dumpLogits.empty())
    throw std::invalid_argument("--dump-logits needs --eval-only (it writes "
                                "the logits of mgt_forward)");
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
  return o;
}

} // namespace mrun
