#!/usr/bin/env python3
"""End-to-end tests of megatron-run with the mock step libraries.

    megatron_run_test.py CASE --megatron-run BIN --mock-tp1 SO --mock-tp2 SO
        --rt-lib SO --mpirun MPIRUN --reference-dir utils/gpt2_reference

Each CASE runs megatron-run (under `mpirun -np 2` for the TP=2 mock) and
checks exit codes, messages, that nothing hangs, and the values the mock's
mgt_forward / mgt_train_step saw (MOCK_DUMP_DIR: the GLOBAL tensors,
gathered over TP). Mock variants: train step (default), train step with
"grad" args (--mock-tpN-grads), forward only (--mock-tpN-eval) and forward
only with a "logits" output (--mock-tpN-logits).
Exit 0 = pass, 1 = fail, 77 = skipped (numpy missing).
"""
import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
except ImportError:  # pragma: no cover
    print("SKIP: numpy is not available")
    sys.exit(77)

A = None          # parsed command line
TMP = None        # per-case temporary directory
FAILURES = []

# The mock model (tests/mock_step.c): checkpoint names and shapes.
MOCK_PARAMS = {
    "wte.weight": (10, 4), "wpe.weight": (3, 4),
    "h.0.ln_1.weight": (4,), "h.0.ln_1.bias": (4,),
    "h.0.attn.c_attn.weight": (4, 12), "h.0.attn.c_attn.bias": (12,),
    "h.0.attn.c_proj.weight": (4, 4), "h.1.mlp.c_proj.weight": (8, 4),
    "ln_f.weight": (4,), "ln_f.bias": (4,),
}
B, T, VOCAB, LAYERS = 2, 3, 10, 2
MPI_ENV = ("MOCK_DUMP_DIR", "MOCK_BREAK_RANK", "MOCK_EXIT_RANK", "MOCK_STOP_RANK")


def check(cond, what):
    if cond:
        print(f"  ok: {what}")
    else:
        print(f"  FAIL: {what}")
        FAILURES.append(what)
    return cond


# ---------------------------------------------------------------- running

def mock_for(tp, variant=""):
    return getattr(A, f"mock_tp{tp}{'_' + variant if variant else ''}")


def command(tp, args, env=None, variant=""):
    """megatron-run with the mock for `tp` ranks (mpirun for tp > 1, or when
    tp is given as ("mpi", n) to force mpirun with n ranks); variant "",
    "grads", "eval", "logits" or "device" picks the mock library."""
    if isinstance(tp, tuple):
        ranks, mock = tp[1], mock_for(tp[2], variant)
    else:
        ranks, mock = tp, mock_for(tp, variant)
    cmd = [A.megatron_run, mock] + list(args)
    if ranks > 1 or isinstance(tp, tuple):
        xs = []
        for k in MPI_ENV:
            if env and k in env:
                xs += ["-x", k]
        cmd = [A.mpirun, "-np", str(ranks), "--oversubscribe"] + xs + cmd
    return cmd


def run(cmd, env=None, timeout=60):
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as ex:
        rc, out, err = "timeout", ex.stdout or "", ex.stderr or ""
        out = out.decode() if isinstance(out, bytes) else out
        err = err.decode() if isinstance(err, bytes) else err
    return rc, out, err, time.monotonic() - t0


def expect_ok(cmd, env=None, what=""):
    rc, out, err, dt = run(cmd, env)
    if not check(rc == 0, f"{what}: exit 0 ({dt:.1f}s)"):
        print("    $ " + " ".join(cmd))
        print("    stdout: " + out.replace("\n", "\n    "))
        print("    stderr: " + err.replace("\n", "\n    "))
    return out


def expect_fail(cmd, pattern, env=None, what="", code=None, max_s=30):
    rc, out, err, dt = run(cmd, env)
    both = out + err
    ok = (rc != 0 and rc != "timeout" and (code is None or rc == code)
          and dt <= max_s and re.search(pattern, both) is not None)
    if not check(ok, f"{what}: fails (rc {rc}, {dt:.1f}s) with /{pattern}/"):
        print("    $ " + " ".join(cmd))
        print("    output: " + both.replace("\n", "\n    "))
    return both


def expect_fail_once(cmd, pattern, what="", code=None):
    """expect_fail, and the message is printed once however many ranks saw
    it."""
    both = expect_fail(cmd, pattern, what=what, code=code)
    n = len(re.findall(pattern, both))
    check(n == 1, f"{what}: printed once (seen {n} times)")


def steps_printed(out):
    return re.findall(r"^step (\d+) loss (\S+)$", out, re.M)


def read_dump(d, step, kind="step"):
    """{name: np.array} from the mock's MOCK_DUMP_DIR/<kind><k>.txt (kind
    "step": mgt_forward calls, "train": mgt_train_step calls)."""
    out = {}
    with open(os.path.join(d, f"{kind}{step}.txt")) as f:
        for line in f:
            name, n, *vals = line.split()
            assert int(n) == len(vals), line[:80]
            dt = np.int32 if name in ("input_ids", "targets") else np.float32
            out[name] = np.array([float(v) for v in vals]).astype(dt)
    return out


def dump_run(tp, args, env=None, steps=1, what=""):
    d = tempfile.mkdtemp(dir=TMP)
    env = dict(env or {}, MOCK_DUMP_DIR=d)
    out = expect_ok(command(tp, list(args) + ["--steps", str(steps)], env),
                    env, what)
    try:
        return [read_dump(d, s) for s in range(steps)], out
    except (OSError, AssertionError) as e:
        check(False, f"{what}: mock dump readable ({e})")
        return [{} for _ in range(steps)], out


def train_run(tp, args, env=None, variant="", what=""):
    """Runs a training command with MOCK_DUMP_DIR; returns (train dumps,
    forward dumps, stdout)."""
    d = tempfile.mkdtemp(dir=TMP)
    env = dict(env or {}, MOCK_DUMP_DIR=d)
    out = expect_ok(command(tp, list(args), env, variant), env, what)
    files = os.listdir(d)
    try:
        train = [read_dump(d, k, "train")
                 for k in range(sum(f.startswith("train") for f in files))]
        fwd = [read_dump(d, k, "step")
               for k in range(sum(f.startswith("step") for f in files))]
    except (OSError, AssertionError) as e:
        check(False, f"{what}: mock dump readable ({e})")
        train, fwd = [], []
    return train, fwd, out


TRAIN_RE = re.compile(r"^step (\d+) loss (\S+) grad_norm (\S+) lr (\S+) ms (\S+) "
                      r"tokens_per_s \d+(?: mfu \S+)? eta \d+:\d\d:\d\d$", re.M)


def train_printed(out):
    """[(step, loss, grad_norm, lr)] as printed (strings; ms left out)."""
    return [m[:4] for m in TRAIN_RE.findall(out)]


def val_printed(out):
    return re.findall(r"^val step (\d+) loss (\S+)$", out, re.M)


def f32(x):
    return np.float32(float(x))


def optimizer_names(name):
    return f"optimizer.{name}.exp_avg", f"optimizer.{name}.exp_avg_sq"


def mock_checksum(dump):
    """mgt_forward's value (the mock's checksum) from a dump, as the mock
    computes it (double, same order), rounded to f32."""
    total = 0.0
    for i, (n, shape) in enumerate(MOCK_PARAMS.items()):
        v = dump[n].astype(np.float64)
        for k in range(v.size):
            total += float(v[k]) * float(1 + (k + 3 * i) % 7)
    for name, scale in (("input_ids", 1e-3), ("targets", 1e-4)):
        for j, x in enumerate(dump[name]):
            total += float(x) * float(j + 1) * scale
    return np.float32(total)


def lr_reference(t, lr, warmup, steps, schedule, min_lr):
    """The documented schedule (Options.h), in the same operation order."""
    if t < warmup:
        return lr * (t + 1) / warmup
    if schedule == "constant" or steps <= warmup:
        return lr
    return min_lr + 0.5 * (lr - min_lr) * (
        1 + math.cos(math.pi * ((t - warmup) / (steps - warmup))))


# ------------------------------------------------------------- data files

def tokens_io():
    sys.path.insert(0, A.reference_dir)
    import tokens_io as t
    return t


def safetensors_io():
    sys.path.insert(0, A.reference_dir)
    import safetensors_io as s
    return s


def token_file(tokens, name="tokens.bin", header=True):
    path = os.path.join(TMP, name)
    if header:
        tokens_io().write_tokens(path, np.asarray(tokens))
    else:
        np.asarray(tokens, dtype="<u2").tofile(path)
    return path


def random_params(seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.normal(0, 1, s).astype(np.float32)
            for n, s in MOCK_PARAMS.items()}


def write_st(path, tensors, dtypes=None, raw_header=None):
    """Own safetensors writer: any dtype (BF16 included) and broken files."""
    dtypes = dtypes or {}
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        dt = dtypes.get(name, "F32")
        a = np.asarray(a)
        if dt == "BF16":
            blob = (np.asarray(a, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            npdt = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I32": "<i4"}[dt]
            blob = a.astype(npdt).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape),
                        "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    hb = raw_header if raw_header is not None else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
    return path


def hf_checkpoint(params, prefix="transformer.", extras=True):
    """Mock params under HF names plus the buffers megatron-run ignores."""
    t = {prefix + n: v for n, v in params.items()}
    if extras:
        for i in range(LAYERS):
            t[f"{prefix}h.{i}.attn.bias"] = np.ones((1, 1, 3, 3), np.float32)
            t[f"{prefix}h.{i}.attn.masked_bias"] = np.array(-1e4, np.float32)
        t["lm_head.weight"] = params["wte.weight"]
    return t


# ------------------------------------------------------- reference init RNG

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def init_reference(seed, name, shape):
    """The init documented in Init.h, in Python."""
    if re.search(r"ln_[12f]\.weight$", name):
        return np.ones(shape, np.float32)
    if name.endswith(".bias"):
        return np.zeros(shape, np.float32)
    std = 0.02
    if name.endswith("attn.c_proj.weight") or name.endswith("mlp.c_proj.weight"):
        std = 0.02 / math.sqrt(2 * LAYERS)
    h = 0xCBF29CE484222325
    for c in name.encode():
        h = ((h ^ c) * 0x100000001B3) & MASK
    stream = mix(seed ^ mix(h))
    out = []
    for i in range(int(np.prod(shape))):
        k = i // 2
        a = mix((stream + (2 * k + 1) * GOLDEN) & MASK)
        b = mix((stream + (2 * k + 2) * GOLDEN) & MASK)
        u1 = ((a >> 11) + 1) * 2.0 ** -53
        u2 = (b >> 11) * 2.0 ** -53
        trig = math.sin if i % 2 else math.cos
        out.append(std * math.sqrt(-2.0 * math.log(u1)) * trig(2 * math.pi * u2))
    return np.array(out, np.float32).reshape(shape)


def params_equal(dump, params, what, exact=True):
    ok = True
    for n, v in params.items():
        got = dump.get(n)
        want = np.asarray(v, np.float32).reshape(-1)
        same = got is not None and got.shape == want.shape and (
            np.array_equal(got, want) if exact
            else np.allclose(got, want, rtol=1e-6, atol=0))
        if not same:
            print(f"    {n}: got {got[:6] if got is not None else None} "
                  f"want {want[:6]}")
            ok = False
    return check(ok, what)


# ------------------------------------------------------------------ cases

def case_help():
    out = expect_ok([A.megatron_run, "--help"], what="--help")
    for opt in ("--init-from", "--seed", "--data", "--eval-only", "--steps",
                "--log", "--help", "--lr", "--beta1", "--beta2", "--eps",
                "--weight-decay", "--grad-clip", "--lr-schedule",
                "--warmup-steps", "--min-lr", "--val-data", "--val-every",
                "--val-steps", "--save", "--resume", "--dump-grads",
                "--dump-logits"):
        check(opt in out, f"--help lists {opt}")


def case_usage():
    t = token_file(range(10))
    m = A.mock_tp1
    for args, pat in [
        ([m, "--data", t, "--eval-only", "--bogus"], r"unknown option --bogus"),
        ([m, "--eval-only", "--data"], r"--data needs a value"),
        ([m, "--data", t, "--eval-only", "--steps"], r"--steps needs a value"),
        ([m, "--data", t, "--steps", "x"], r"--steps: expected an integer >= 1"),
        ([m, "--data", t, "--seed", "-3"], r"--seed: expected a non-negative"),
        ([m, "--eval-only"], r"--data FILE is required"),
        (["--data", t], r"missing STEP\.so"),
        ([m, "extra", "--data", t], r'unexpected argument "extra"'),
        ([m, "-x", "--data", t], r"unknown option -x"),
        ([m, "--data", t, "--lr", "x"], r"--lr: expected a number >= 0"),
        ([m, "--data", t, "--beta2", "1"], r"--beta2: expected a number >= 0.* and < 1"),
        ([m, "--data", t, "--lr", "1e39"],
         r"--lr: 1e39 is beyond the range of a float"),
        ([m, "--data", t, "--eps", "1e39"],
         r"--eps: 1e39 is beyond the range of a float"),
        ([m, "--data", t, "--lr", "0.1", "--min-lr", "1"],
         r"--min-lr 1 exceeds --lr 0\.1 \(the cosine schedule decays"),
        ([m, "--data", t, "--lr-schedule", "linear"],
         r"--lr-schedule: expected constant or cosine"),
        ([m, "--data", t, "--val-steps", "0"], r"--val-steps: expected an integer >= 1"),
        ([m, "--data", t, "--eval-only", "--save", "x"],
         r"--save is for training, not --eval-only"),
        ([m, "--data", t, "--resume", "x", "--init-from", "y"],
         r"--resume and --init-from exclude each other"),
        ([m, "--data", t, "--dump-logits", "x"],
         r"--dump-logits needs --eval-only"),
        ([m, "--data", t, "--eval-only", "--dump-logits", ""],
         r"--dump-logits: empty file name"),
    ]:
        expect_fail([A.megatron_run] + args, pat, what=" ".join(args[-2:]),
                    code=2)
    expect_fail_once(command(2, ["--data", t, "--eval-only", "--bogus"]),
                     r"unknown option --bogus",
                     what="mpirun -np 2, unknown option", code=2)


def case_load_errors():
    t = token_file(range(10))
    missing = os.path.join(TMP, "nonexistent.so")
    expect_fail([A.megatron_run, missing, "--data", t, "--eval-only"],
                r"cannot load .*nonexistent\.so", what="missing step.so", code=1)
    expect_fail_once([A.mpirun, "-np", "2", "--oversubscribe", A.megatron_run,
                      missing, "--data", t, "--eval-only"],
                     r"cannot load .*nonexistent\.so",
                     what="mpirun -np 2, missing step.so", code=1)
    junk = os.path.join(TMP, "junk.so")
    with open(junk, "w") as f:
        f.write("not an ELF file\n")
    expect_fail([A.megatron_run, junk, "--data", t, "--eval-only"],
                r"cannot load .*junk\.so", what="not a shared object", code=1)
    expect_fail([A.megatron_run, A.rt_lib, "--data", t, "--eval-only"],
                r"does not export mgt_manifest", what="no mgt_manifest",
                code=1)
    # A truncated library is refused before dlopen maps past its end (which
    # killed the process with SIGBUS).
    trunc = os.path.join(TMP, "trunc.so")
    with open(A.mock_tp1, "rb") as f, open(trunc, "wb") as g:
        g.write(f.read(4000))
    expect_fail([A.megatron_run, trunc, "--data", t, "--eval-only"],
                r"trunc\.so is truncated or corrupt \(the file has 4000 bytes\)",
                what="truncated step.so", code=1)
    expect_fail([A.megatron_run, A.no_runtime_step, "--data", t, "--eval-only"],
                r"no_runtime_step\.so is not linked against a megatron runtime "
                r"\(no mrt_context_create\)", what="no runtime", code=1)


def case_no_train():
    t = token_file(range(10))
    expect_fail([A.megatron_run, A.mock_tp1_eval, "--data", t],
                r"_eval\.so was compiled without --train: compile it with "
                r"megatron-compile --train to train, or pass --eval-only",
                what="tp1 without mgt_train_step, without --eval-only", code=1)
    expect_fail(command(2, ["--data", t], variant="eval"),
                r"_eval\.so was compiled without --train: compile it with "
                r"megatron-compile --train to train, or pass --eval-only",
                what="tp2 without mgt_train_step, without --eval-only")
    out = expect_ok(command(2, ["--data", t, "--eval-only"], variant="eval"),
                    what="the forward-only library runs --eval-only")
    check(len(steps_printed(out)) == 1, "... and prints the loss")
    check(re.search(r"^mean loss [-+0-9.e]+ over 1 batch\(es\)$", out, re.M) is not None,
          "... and their mean")


def case_tp_mismatch():
    t = token_file(range(10))
    expect_fail([A.megatron_run, A.mock_tp2, "--data", t, "--eval-only"],
                r"compiled for tp=2: launch it as `mpirun -np 2.*the 1 MPI "
                r"ranks are not a multiple of tp_size 2", what="tp2 step.so on 1 rank",
                code=1)
    expect_fail(command(("mpi", 2, 1), ["--data", t, "--eval-only"]),
                r"compiled for tp=1: launch it as `mpirun -np 1 .*\(2 ranks make dp=2\)",
                what="tp1 step.so on 2 ranks")
    expect_fail_once(command(("mpi", 3, 2), ["--data", t, "--eval-only"]),
                     r"compiled for tp=2: .*the 3 MPI ranks are not a multiple "
                     r"of tp_size 2", what="tp2 step.so on 3 ranks", code=1)


def case_seed_init():
    t = token_file(np.arange(40) % VOCAB)
    args = ["--data", t, "--eval-only"]
    d1, out1 = dump_run(1, args, steps=2, what="tp1, default seed")
    d2, out2 = dump_run(2, args, steps=2, what="tp2, default seed")
    check(len(steps_printed(out1)) == 2 and steps_printed(out1) == steps_printed(out2),
          f"tp1 and tp2 print the same losses {steps_printed(out1)}")
    params_equal(d2[0], {n: d1[0].get(n) for n in MOCK_PARAMS},
                 "tp2 global weights == tp1 global weights (bitwise)")
    ref = {n: init_reference(1337, n, s) for n, s in MOCK_PARAMS.items()}
    params_equal(d1[0], ref, "weights match the documented init (Python "
                 "reimplementation of Init.h)", exact=False)
    w = d1[0]["wte.weight"]
    check(np.all(w != 0) and np.abs(w).max() < 0.2, "wte weights are N(0, 0.02)-like")
    check(np.all(d1[0]["h.0.ln_1.weight"] == 1) and np.all(d1[0]["ln_f.weight"] == 1),
          "layer-norm weights are 1")
    check(all(np.all(d1[0][n] == 0) for n in MOCK_PARAMS if n.endswith(".bias")),
          "biases are 0")
    d3, _ = dump_run(2, args + ["--seed", "7"], what="tp2, seed 7")
    check(not np.array_equal(d3[0]["wte.weight"], d1[0]["wte.weight"]),
          "--seed 7 gives other weights")
    params_equal(d3[0], {n: init_reference(7, n, s) for n, s in MOCK_PARAMS.items()},
                 "seed 7 matches the documented init", exact=False)


def case_init_from_file():
    params = random_params(1)
    st = safetensors_io()
    ck = os.path.join(TMP, "model.safetensors")
    st.write_safetensors(ck, hf_checkpoint(params), metadata={"n_layer": 2})
    t = token_file(np.arange(40) % VOCAB)
    args = ["--data", t, "--eval-only", "--init-from", ck]
    d1, out1 = dump_run(1, args, what="tp1 from safetensors_io checkpoint")
    d2, out2 = dump_run(2, args, what="tp2 from safetensors_io checkpoint")
    params_equal(d1[0], params, "tp1 weights == checkpoint (bitwise)")
    params_equal(d2[0], params, "tp2 weights == checkpoint (bitwise; sections, "
                 "padded vocab)")
    check(steps_printed(out1) == steps_printed(out2), "tp1 and tp2 losses equal")
    plain = os.path.join(TMP, "plain.safetensors")
    st.write_safetensors(plain, hf_checkpoint(params, prefix="", extras=False))
    d3, out3 = dump_run(2, ["--data", t, "--eval-only", "--init-from", plain],
                        what="tp2, names without transformer.")
    params_equal(d3[0], params, "names without prefix load the same")


def case_init_from_half():
    # Values exactly representable in f16 and bf16 load exactly.
    params = {n: (np.round(v * 8) / 8).astype(np.float32)
              for n, v in random_params(2).items()}
    t = token_file(np.arange(40) % VOCAB)
    for dt in ("F16", "BF16", "F64"):
        ck = write_st(os.path.join(TMP, f"m_{dt}.safetensors"),
                      hf_checkpoint(params, extras=False),
                      dtypes={"transformer." + n: dt for n in params})
        d, _ = dump_run(2, ["--data", t, "--eval-only", "--init-from", ck],
                        what=f"tp2 from a {dt} checkpoint")
        params_equal(d[0], params, f"{dt} converted to f32")


def case_checkpoint_errors():
    params = random_params(3)
    t = token_file(np.arange(40) % VOCAB)
    good = hf_checkpoint(params)

    def fails(path, pattern, what):
        expect_fail(command(2, ["--data", t, "--eval-only", "--init-from", path]),
                    r"checkpoint " + re.escape(path) + r": " + pattern, what=what)

    fails(os.path.join(TMP, "nope.safetensors"), r"cannot open: No such file",
          "missing file")
    p = os.path.join(TMP, "short.safetensors")
    with open(p, "wb") as f:
        f.write(b"\x10\x00\x00")
    fails(p, r"truncated header: the file has 3 bytes", "file shorter than 8 bytes")
    p = os.path.join(TMP, "trunc_header.safetensors")
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", 1000) + b'{"a": 1')
    fails(p, r"truncated header: header length 1000 exceeds the file size 15",
          "header truncated")
    p = write_st(os.path.join(TMP, "notjson.safetensors"), {},
                 raw_header=b"{this is not json}")
    fails(p, r"header is not valid JSON", "header not JSON")
    p = write_st(os.path.join(TMP, "truncated.safetensors"), good)
    os.truncate(p, os.path.getsize(p) - 8)
    fails(p, r'tensor "[^"]+": data_offsets \[\d+, \d+\) exceed the \d+-byte data '
          r"section: the data is shorter than the header says", "data truncated")
    bad = dict(good)
    del bad["transformer.h.0.ln_1.bias"]
    fails(write_st(os.path.join(TMP, "missing.safetensors"), bad),
          r'tensor "h\.0\.ln_1\.bias" is missing', "missing tensor")
    bad = dict(good, **{"transformer.wte.weight": np.zeros((11, 4), np.float32)})
    fails(write_st(os.path.join(TMP, "shape.safetensors"), bad),
          r'tensor "transformer\.wte\.weight": shape \[11, 4\] but the model '
          r"expects \[10, 4\]", "wrong shape")
    fails(write_st(os.path.join(TMP, "dtype.safetensors"), good,
                   dtypes={"transformer.ln_f.bias": "I32"}),
          r'tensor "transformer\.ln_f\.bias": dtype I32 is not supported',
          "wrong dtype")
    bad = dict(good, **{"transformer.h.2.mlp.c_fc.weight": np.zeros((4, 16), np.float32)})
    fails(write_st(os.path.join(TMP, "extra.safetensors"), bad),
          r"tensors not in the model: transformer\.h\.2\.mlp\.c_fc\.weight",
          "tensor not in the model")
    bad = dict(good, **{"wte.weight": params["wte.weight"]})
    fails(write_st(os.path.join(TMP, "dup.safetensors"), bad),
          r'tensor "wte\.weight" appears twice', "duplicate after prefix strip")
    p = write_st(os.path.join(TMP, "overlap.safetensors"), good)
    header = st_header(p)
    a, b = "transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"
    header[b]["data_offsets"] = header[a]["data_offsets"]
    fails(write_st(p, good, raw_header=json.dumps(header).encode()),
          r'tensors "transformer\.h\.0\.ln_1\.(weight|bias)" and '
          r'"transformer\.h\.0\.ln_1\.(weight|bias)" overlap: data_offsets',
          "two tensors on the same bytes")
    p = write_st(os.path.join(TMP, "llama.safetensors"), good)
    header = dict(st_header(p), __metadata__={"format": "megatron-mlir",
                                              "model": "llama"})
    fails(write_st(p, good, raw_header=json.dumps(header).encode()),
          r'a checkpoint of the model "llama", but the step library\'s model '
          r'is "mock"', "another model's checkpoint")


def case_data_batches():
    rng = np.random.default_rng(5)
    toks = rng.integers(0, VOCAB, size=13)  # 13 tokens: batches wrap around
    ti = tokens_io()
    steps = 5
    for header in (True, False):
        t = token_file(toks, f"t_{header}.bin", header=header)
        kind = "llm.c" if header else "raw uint16"
        for tp in (1, 2):
            d, out = dump_run(tp, ["--data", t, "--eval-only"], steps=steps,
                              what=f"tp{tp}, {kind}, {steps} steps")
            ok = len(steps_printed(out)) == steps
            for s in range(steps):
                inp, tgt = ti.batch(toks, s, B, T)
                ok &= np.array_equal(d[s].get("input_ids"), inp.reshape(-1))
                ok &= np.array_equal(d[s].get("targets"), tgt.reshape(-1))
            check(ok, f"tp{tp}, {kind}: batches == tokens_io.batch (wrap-around)")


def case_data_errors():
    def fails(path, pattern, what, steps=1):
        return expect_fail(
            command(2, ["--data", path, "--eval-only", "--steps", str(steps)]),
            r"data " + re.escape(path) + r": " + pattern, what=what)

    fails(os.path.join(TMP, "nope.bin"), r"cannot open: No such file", "missing file")
    good = token_file(np.arange(20) % VOCAB, "good.bin")
    raw = open(good, "rb").read()
    p = os.path.join(TMP, "version.bin")
    with open(p, "wb") as f:
        f.write(raw[:4] + struct.pack("<i", 2) + raw[8:])
    fails(p, r"bad llm\.c header: unsupported version 2", "bad version")
    p = os.path.join(TMP, "count.bin")
    with open(p, "wb") as f:
        f.write(raw[:8] + struct.pack("<i", 100) + raw[12:])
    fails(p, r"bad llm\.c header: it says 100 tokens but the file holds 40 "
          r"bytes", "count inconsistent with the size")
    p = os.path.join(TMP, "short_header.bin")
    with open(p, "wb") as f:
        f.write(raw[:100])
    fails(p, r"bad llm\.c header: the file has 100 bytes", "header cut short")
    fails(token_file(np.arange(6) % VOCAB, "six.bin"),
          r"6 tokens, fewer than the 7 one batch needs", "fewer than B*T+1")
    bad = np.arange(30) % VOCAB
    bad[5] = 10
    fails(token_file(bad, "vocab.bin"),
          r"token at position 5 has id 10, which is >= the model's "
          r"valid_vocab 10", "token id >= valid_vocab")
    late = np.arange(30) % VOCAB
    late[20] = 4000
    p = token_file(late, "late.bin")
    expect_ok(command(2, ["--data", p, "--eval-only", "--steps", "3"]),
              what="a bad token beyond the batches used is not read")
    out = fails(p, r"token at position 20 has id 4000", "bad token of a later "
                "step", steps=4)
    check(not steps_printed(out), "... reported before any step runs")
    p = os.path.join(TMP, "odd.bin")
    with open(p, "wb") as f:
        f.write(b"\x01\x00" * 20 + b"\x01")
    fails(p, r"no llm\.c header .* odd size \(41 bytes\)", "raw file of odd size")


def case_rank_failure():
    t = token_file(np.arange(40) % VOCAB)
    for rank in (1, 0):
        out = expect_fail(
            command(2, ["--data", t, "--eval-only"], {"MOCK_BREAK_RANK": str(rank)}),
            rf'rank {rank}: the model states no initialisation for parameter '
            r'"h\.0\.ln_9\.weight"', env={"MOCK_BREAK_RANK": str(rank)},
            what=f"only rank {rank} fails (seed init)")
        check(not steps_printed(out), "... and no rank runs a step")
    ck = write_st(os.path.join(TMP, "m.safetensors"), hf_checkpoint(random_params(4)))
    out = expect_fail(
        command(2, ["--data", t, "--eval-only", "--init-from", ck],
                {"MOCK_BREAK_RANK": "1"}),
        r'rank 1: checkpoint .*: tensor "h\.0\.ln_9\.weight" is missing',
        env={"MOCK_BREAK_RANK": "1"}, what="only rank 1 fails (checkpoint)")
    check(not steps_printed(out), "... and no rank runs a step")


def case_rank_dies():
    t = token_file(np.arange(40) % VOCAB)
    env = {"MOCK_EXIT_RANK": "1"}
    expect_fail(command(2, ["--data", t, "--eval-only"], env),
                r"mock_step: rank 1 exits in mgt_forward", env=env,
                what="rank 1 exits inside mgt_forward")


def case_rank_stops():
    # A rank that stops answering (SIGSTOP in its second step) ends the job
    # at the collective timeout, naming the collective; it never hangs.
    t = token_file(np.arange(40) % VOCAB)
    env = {"MOCK_STOP_RANK": "1"}
    out = expect_fail(command(2, ["--data", t, "--steps", "5",
                                  "--collective-timeout", "2"], env),
                      r"megatron-rt: rank 0: all_reduce over tp did not finish "
                      r"within 2 s: a rank of its group stopped answering",
                      env=env, what="rank 1 stops in its second step", max_s=20)
    check(len(train_printed(out)) == 1, "... after the first step")
    expect_fail(command(1, ["--data", t, "--collective-timeout", "-1"]),
                r"--collective-timeout: expected a number >= 0", code=2,
                what="a negative timeout")


def case_log_file():
    t = token_file(np.arange(40) % VOCAB)
    log = os.path.join(TMP, "log.jsonl")
    out = expect_ok(command(2, ["--data", t, "--eval-only", "--steps", "3",
                                "--log", log]), what="tp2 with --log")
    printed = steps_printed(out)
    check(len(printed) == 3 and [int(s) for s, _ in printed] == [0, 1, 2],
          "rank 0 alone prints one line per step")
    try:
        lines = [json.loads(l) for l in open(log)]
    except (OSError, ValueError) as e:
        check(False, f"log readable as JSON lines ({e})")
        return
    check([l.get("step") for l in lines] == [0, 1, 2], "one JSON line per step")
    check(all(set(l) == {"step", "loss", "ms", "tokens_per_s"} for l in lines),
          "keys step, loss, ms, tokens_per_s")
    check(all(np.float32(l["loss"]) == np.float32(float(x))
              for l, (_, x) in zip(lines, printed)), "logged loss == printed loss")
    check(all(l["ms"] >= 0 and l["tokens_per_s"] > 0 for l in lines),
          "ms and tokens_per_s are positive")
    bad = os.path.join(TMP, "no", "such", "dir", "log.jsonl")
    expect_fail(command(2, ["--data", t, "--eval-only", "--log", bad]),
                r"rank 0: cannot write log .*log\.jsonl", what="unwritable log")


def case_train_hyperparameters():
    t = token_file(np.arange(60) % VOCAB)
    args = ["--data", t, "--steps", "3", "--lr", "0.002", "--beta1", "0.8",
            "--beta2", "0.95", "--eps", "1e-6", "--weight-decay", "0.1",
            "--grad-clip", "0.25", "--seed", "5"]
    tr1, _, out1 = train_run(1, args, what="tp1, 3 train steps")
    tr2, _, out2 = train_run(2, args, what="tp2, 3 train steps")
    p1, p2 = train_printed(out1), train_printed(out2)
    check(len(tr2) == 3 and len(p2) == 3 and [s for s, *_ in p2] == ["0", "1", "2"],
          "3 train_step calls, rank 0 prints 3 lines")
    check(p1 == p2, "tp1 and tp2 print the same loss, grad_norm, lr")
    ti = tokens_io()
    ok_hp = ok_batch = ok_res = True
    for s, (d, line) in enumerate(zip(tr2, p2)):
        want = np.array([0.002, 0.8, 0.95, 1e-6, 0.1, 0.25, s + 1, 5], np.float32)
        ok_hp &= np.array_equal(d.get("hyperparameters"), want)
        inp, tgt = ti.batch(np.arange(60) % VOCAB, s, B, T)
        ok_batch &= np.array_equal(d["input_ids"], inp.reshape(-1))
        ok_batch &= np.array_equal(d["targets"], tgt.reshape(-1))
        ok_res &= (f32(line[1]) == d["mock.loss"][0] and
                   f32(line[2]) == d["mock.grad_norm"][0] and
                   f32(line[3]) == np.float32(0.002))
    check(ok_hp, "hyperparameters [lr, beta1, beta2, eps, wd, clip, step, "
          "dropout seed] reach every step (step = 1-based update count, the "
          "seed --seed's)")
    check(ok_batch, "train step s gets batch s")
    check(ok_res, "printed loss / grad_norm are the step's results, lr the "
          "hyperparameter")
    check(all(np.all(d[n + ".exp_avg"] == 0) for n in MOCK_PARAMS for d in tr2[:1]),
          "AdamW state starts at zero")
    ref = {n: init_reference(5, n, s) for n, s in MOCK_PARAMS.items()}
    params_equal(tr2[0], ref, "step 0 sees the seeded init", exact=False)
    # The mock applies torch AdamW with clipping: step 1's state follows.
    d0, d1 = tr2[0], tr2[1]
    norm = float(d0["mock.grad_norm"][0])
    coef = min(1.0, 0.25 / (norm + 1e-6))
    ok = True
    for n in MOCK_PARAMS:
        g = d0["mock.grad." + n].astype(np.float64) * coef
        m = 0.2 * g
        v = 0.05 * g * g
        p = d0[n] * (1 - 0.002 * 0.1)
        p = p - 0.002 / 0.2 * m / (np.sqrt(v) / math.sqrt(0.05) + 1e-6)
        ok &= np.allclose(d1[n + ".exp_avg"], m, rtol=1e-5, atol=1e-9)
        ok &= np.allclose(d1[n + ".exp_avg_sq"], v, rtol=1e-5, atol=1e-12)
        ok &= np.allclose(d1[n], p, rtol=1e-5, atol=1e-7)
    check(ok, "after step 0: params and AdamW state == torch AdamW of the "
          "clipped gradient (numpy)")


def case_lr_schedule():
    t = token_file(np.arange(100) % VOCAB)
    N = 10
    for schedule, warmup, min_lr in (("constant", 3, 0.0), ("cosine", 3, 1e-4),
                                     ("cosine", 0, 0.0), ("cosine", 12, 0.0)):
        args = ["--data", t, "--steps", str(N), "--lr", "1e-3",
                "--lr-schedule", schedule, "--warmup-steps", str(warmup),
                "--min-lr", str(min_lr)]
        tr, _, out = train_run(1, args, what=f"{schedule}, warmup {warmup}")
        printed = train_printed(out)
        want = [np.float32(lr_reference(s, 1e-3, warmup, N, schedule, min_lr))
                for s in range(N)]
        check(len(printed) == N and [f32(l[3]) for l in printed] == want,
              f"{schedule}, warmup {warmup}, min {min_lr}: printed lr == "
              f"Python formula at every step ({[l[3] for l in printed[:4]]}...)")
        check(len(tr) == N and all(d["hyperparameters"][0] == w and
                                   d["hyperparameters"][6] == s + 1
                                   for s, (d, w) in enumerate(zip(tr, want))),
              "... and reaches the step as hyperparameters[0]")
    # Spot values (not only self-consistency): cosine, W=3, N=10, min 1e-4.
    spot = {0: 1e-3 / 3, 2: 1e-3, 3: 1e-3, 9: 1e-4 + 0.45e-3 * (1 + math.cos(math.pi * 6 / 7))}
    check(all(abs(lr_reference(s, 1e-3, 3, 10, "cosine", 1e-4) - v) < 1e-15
              for s, v in spot.items()), "reference formula spot values")


def saved(path):
    return safetensors_io().read_safetensors(path, with_metadata=True)


def case_save_roundtrip():
    t = token_file(np.arange(60) % VOCAB)
    files = {}
    ti = tokens_io()
    for tp in (1, 2):
        path = os.path.join(TMP, f"saved_tp{tp}.safetensors")
        # --val-data: the forward call after the last update dumps the final
        # weights and AdamW state.
        tr, fwd, _ = train_run(tp, ["--data", t, "--steps", "3", "--lr", "0.01",
                                    "--val-data", t, "--save", path],
                               what=f"tp{tp}: train 3 steps, --save")
        files[tp] = path
        if not check(os.path.exists(path) and not os.path.exists(path + ".tmp"),
                     f"tp{tp}: {os.path.basename(path)} written, no .tmp left"):
            continue
        tensors, meta = saved(path)
        want = set(MOCK_PARAMS) | {x for n in MOCK_PARAMS for x in optimizer_names(n)}
        check(set(tensors) == want, f"tp{tp}: params + optimizer.<p>.exp_avg/_sq")
        check(all(tensors[n].shape == s for n, s in MOCK_PARAMS.items()),
              f"tp{tp}: checkpoint shapes (padding rows dropped)")
        check(meta.get("step") == "3" and meta.get("format") == "megatron-mlir"
              and meta.get("lr") == "0.01" and meta.get("beta2") == "0.999",
              f"tp{tp}: metadata step 3, format, hyperparameters ({meta})")
        final = fwd[-1] if fwd else {}
        params_equal(final, {n: tensors[n] for n in MOCK_PARAMS},
                     f"tp{tp}: saved weights == the step's final weights (bitwise)")
        params_equal(final, {n + ".exp_avg": tensors[optimizer_names(n)[0]]
                             for n in MOCK_PARAMS},
                     f"tp{tp}: saved exp_avg == the step's (bitwise)")
        params_equal(final, {n + ".exp_avg_sq": tensors[optimizer_names(n)[1]]
                             for n in MOCK_PARAMS},
                     f"tp{tp}: saved exp_avg_sq == the step's (bitwise)")
        # --init-from a --save file: weights only (optimizer.* and metadata
        # ignored).
        d, _ = dump_run(tp, ["--data", t, "--eval-only", "--init-from", path],
                        what=f"tp{tp}: --eval-only --init-from the saved file")
        params_equal(d[0], {n: tensors[n] for n in MOCK_PARAMS},
                     f"tp{tp}: --init-from loads the saved weights (bitwise)")
        # --resume: weights, AdamW state, step.
        for rtp in (1, 2):
            tr, _, out = train_run(rtp, ["--data", t, "--steps", "4", "--resume", path],
                                   what=f"tp{tp} file, --resume at tp{rtp}")
            d = tr[0] if tr else {}
            params_equal(d, {n: tensors[n] for n in MOCK_PARAMS},
                         f"tp{tp} -> tp{rtp} resume: weights (bitwise)")
            params_equal(d, {n + ".exp_avg": tensors[optimizer_names(n)[0]]
                             for n in MOCK_PARAMS} |
                         {n + ".exp_avg_sq": tensors[optimizer_names(n)[1]]
                          for n in MOCK_PARAMS},
                         f"tp{tp} -> tp{rtp} resume: AdamW state (bitwise)")
            inp, _ = ti.batch(np.arange(60) % VOCAB, 3, B, T)
            check(len(tr) == 1 and d["hyperparameters"][6] == 4 and
                  np.array_equal(d["input_ids"], inp.reshape(-1)) and
                  [p[0] for p in train_printed(out)] == ["3"],
                  f"tp{tp} -> tp{rtp} resume: one step, step 3 (batch 3, "
                  "AdamW step 4)")
    if len(files) == 2 and all(os.path.exists(f) for f in files.values()):
        check(open(files[1], "rb").read() == open(files[2], "rb").read(),
              "tp1 and tp2 save byte-identical files (the mock is TP-invariant)")


def case_resume_continuation():
    t = token_file(np.random.default_rng(7).integers(0, VOCAB, 97))
    v = token_file(np.random.default_rng(8).integers(0, VOCAB, 50), "val.bin")
    common = ["--data", t, "--lr", "0.01", "--warmup-steps", "2",
              "--weight-decay", "0.1", "--grad-clip", "0.3", "--beta2", "0.99",
              "--val-data", v, "--val-every", "3", "--val-steps", "2"]
    a, b5, b = (os.path.join(TMP, f"{x}.safetensors") for x in ("a", "b5", "b"))
    out_a = expect_ok(command(2, common + ["--steps", "10", "--save", a]),
                      what="tp2: 10 steps straight")
    out_1 = expect_ok(command(2, common + ["--steps", "5", "--save", b5]),
                      what="tp2: 5 steps, --save")
    out_2 = expect_ok(command(2, common + ["--steps", "10", "--resume", b5,
                                           "--save", b]),
                      what="tp2: --resume, steps 5..9")
    pa, p1, p2 = train_printed(out_a), train_printed(out_1), train_printed(out_2)
    check(len(pa) == 10 and p1 + p2 == pa,
          f"5 + resume 5 prints the same step/loss/grad_norm/lr lines as 10 "
          f"straight (bitwise; steps {[p[0] for p in p2]})")
    va, v1, v2 = dict(val_printed(out_a)), dict(val_printed(out_1)), dict(val_printed(out_2))
    check(list(va) == ["3", "6", "9", "10"] and
          all((v1 | v2).get(k) == x for k, x in va.items()),
          f"validation at 3, 6, 9 and the end; equal losses ({va})")
    check(os.path.exists(a) and os.path.exists(b) and
          open(a, "rb").read() == open(b, "rb").read(),
          "final checkpoints byte-identical")
    expect_fail(command(2, common + ["--steps", "5", "--resume", b5]),
                r"checkpoint .*b5\.safetensors is at step 5: nothing to do for "
                r"--steps 5", what="--resume at the last step")


def case_save_atomic():
    t = token_file(np.arange(40) % VOCAB)
    bad = os.path.join(TMP, "no", "such", "dir", "x.safetensors")
    out = expect_fail(command(2, ["--data", t, "--steps", "2", "--save", bad]),
                      r"rank 0: cannot write .*x\.safetensors\.tmp: No such file",
                      what="--save into a missing directory", code=1)
    check(len(train_printed(out)) == 0, "... before training")
    d = os.path.join(TMP, "adir")
    os.mkdir(d)
    expect_fail(command(2, ["--data", t, "--save", d]),
                r"rank 0: cannot write .*adir: it is a directory",
                what="--save onto a directory", code=1)
    check(os.path.isdir(d) and not os.path.exists(d + ".tmp"),
          "... leaves no .tmp and the directory alone")
    f = os.path.join(TMP, "old.safetensors")
    with open(f, "w") as fh:
        fh.write("an old file")
    expect_ok(command(2, ["--data", t, "--save", f]), what="--save over a file")
    check(not os.path.exists(f + ".tmp") and saved(f)[1].get("step") == "1",
          "the file is replaced (renamed from .tmp) and readable")
    expect_fail(command(1, ["--data", t, "--save", bad]),
                r"megatron-run: cannot write .*x\.safetensors\.tmp",
                what="tp1: --save into a missing directory", code=1)
    check(not os.path.exists(bad), "no file")


def case_periodic_checkpoints():
    t = token_file(np.random.default_rng(9).integers(0, VOCAB, 97))
    common = ["--data", t, "--lr", "0.01", "--warmup-steps", "2",
              "--weight-decay", "0.1", "--grad-clip", "0.3"]
    d, a, b = (os.path.join(TMP, x) for x in ("ck", "a.safetensors", "b.safetensors"))
    os.mkdir(d)
    out_a = expect_ok(command(2, common + ["--steps", "10", "--save-every", "3",
                                           "--save-dir", d, "--keep-last", "2",
                                           "--save", a]),
                      what="tp2: 10 steps, a checkpoint every 3, the 2 latest kept")
    check(sorted(os.listdir(d)) == ["step-00000006.safetensors",
                                    "step-00000009.safetensors"],
          f"--save-dir holds steps 6 and 9 ({sorted(os.listdir(d))})")
    check(saved(os.path.join(d, "step-00000009.safetensors"))[1].get("step") == "9",
          "a periodic checkpoint records its step")

    # A run killed while writing step 9 leaves step 6 and a .tmp: --resume
    # of the directory takes step 6 and continues as if never stopped.
    crash = os.path.join(TMP, "crash")
    os.mkdir(crash)
    with open(os.path.join(d, "step-00000006.safetensors"), "rb") as src, \
         open(os.path.join(crash, "step-00000006.safetensors"), "wb") as dst:
        dst.write(src.read())
    with open(os.path.join(crash, "step-00000009.safetensors.tmp"), "wb") as f:
        f.write(b"half a checkpoint")
    out_b = expect_ok(command(2, common + ["--steps", "10", "--resume", crash,
                                           "--save-every", "3", "--save-dir", crash,
                                           "--save", b]),
                      what="tp2: --resume of the directory, steps 6..9")
    check(train_printed(out_b) == train_printed(out_a)[6:],
          "the resumed run prints steps 6..9 as the straight run did (bitwise)")
    check(open(a, "rb").read() == open(b, "rb").read(),
          "final checkpoints byte-identical")
    check(sorted(os.listdir(crash)) == ["step-00000006.safetensors",
                                        "step-00000009.safetensors"],
          "step 9 written over the crash's .tmp")

    # A real SIGKILL at an arbitrary step, one rank: the latest finished
    # checkpoint resumes to the straight run's last steps and weights.
    k = os.path.join(TMP, "killed")
    os.mkdir(k)
    p = subprocess.Popen(command(1, common + ["--steps", "100000", "--save-every", "1",
                                              "--save-dir", k, "--keep-last", "3"]),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(
            [f for f in os.listdir(k) if f.endswith(".safetensors")]) < 3:
        time.sleep(0.01)
    p.kill()
    p.wait()
    done = sorted(int(f[5:13]) for f in os.listdir(k) if f.endswith(".safetensors"))
    if check(len(done) >= 1, f"checkpoints before the kill ({done})"):
        last = done[-1]
        steps = ["--steps", str(last + 3)]
        c, e = os.path.join(TMP, "c.safetensors"), os.path.join(TMP, "e.safetensors")
        out_c = expect_ok(command(1, common + steps + ["--save", c]),
                          what=f"tp1: {last + 3} steps straight")
        out_e = expect_ok(command(1, common + steps + ["--resume", k, "--save", e]),
                          what=f"tp1: --resume after SIGKILL, from step {last}")
        check(train_printed(out_e) == train_printed(out_c)[last:] and
              open(c, "rb").read() == open(e, "rb").read(),
              "after SIGKILL: the same last steps and final checkpoint (bitwise)")

    # The disk fills while step 4's checkpoint is written (its .tmp is
    # /dev/full): a located error, exit 1, step 2's checkpoint kept and no
    # .tmp left.
    full = os.path.join(TMP, "full")
    os.mkdir(full)
    os.symlink("/dev/full", os.path.join(full, "step-00000004.safetensors.tmp"))
    expect_fail(command(2, common + ["--steps", "6", "--save-every", "2",
                                     "--save-dir", full]),
                r"rank 0: cannot write .*step-00000004\.safetensors\.tmp: No space "
                r"left on device", code=1, what="a full disk at step 4's checkpoint")
    check(sorted(os.listdir(full)) == ["step-00000002.safetensors"],
          f"... keeps step 2 and leaves no .tmp ({sorted(os.listdir(full))})")

    for args, pattern in (
            (["--save-every", "2"], r"--save-every and --save-dir go together"),
            (["--save-dir", d], r"--save-every and --save-dir go together"),
            (["--keep-last", "2"], r"--keep-last needs --save-every"),
            (["--save-every", "0", "--save-dir", d], r"--save-every: expected an integer >= 1")):
        expect_fail(command(1, ["--data", t] + args), pattern, code=2,
                    what=" ".join(args))
    # Another run's later checkpoints in --save-dir, or no such directory:
    # refused before the first step, not found at the first save.
    other = os.path.join(TMP, "other")
    os.mkdir(other)
    with open(os.path.join(d, "step-00000009.safetensors"), "rb") as src, \
         open(os.path.join(other, "step-00000100.safetensors"), "wb") as dst:
        dst.write(src.read())
    out = expect_fail(command(2, common + ["--steps", "4", "--save-every", "2",
                                           "--save-dir", other]),
                      r"checkpoint directory .*other holds .*step-00000100\.safetensors, "
                      r"beyond this run's start \(step 0\): another run's checkpoints",
                      code=1, what="--save-dir holding a later run's checkpoint")
    check(train_printed(out) == [] and os.listdir(other) == ["step-00000100.safetensors"],
          "... before any step, the other run's checkpoint untouched")
    # A --save-dir not there yet is made; one whose parent is not there is
    # refused before the first step.
    fresh = os.path.join(TMP, "fresh")
    expect_ok(command(2, common + ["--steps", "2", "--save-every", "2",
                                   "--save-dir", fresh]),
              what="a --save-dir that does not exist yet")
    check(os.listdir(fresh) == ["step-00000002.safetensors"],
          "... made, and the checkpoint saved in it")
    out = expect_fail(command(2, common + ["--steps", "4", "--save-every", "2",
                                           "--save-dir", os.path.join(TMP, "nowhere", "ckpt")]),
                      r"checkpoint directory .*nowhere/ckpt: cannot create: No such file",
                      code=1, what="a --save-dir whose parent does not exist")
    check(train_printed(out) == [], "... before any step")
    empty = os.path.join(TMP, "empty")
    os.mkdir(empty)
    expect_fail(command(2, ["--data", t, "--steps", "2", "--resume", empty]),
                r"checkpoint directory .*empty holds no checkpoint", code=1,
                what="--resume of a directory without checkpoints")


def case_dump_grads():
    t = token_file(np.arange(40) % VOCAB)
    files = {}
    for tp in (1, 2):
        g = os.path.join(TMP, f"grads_tp{tp}.safetensors")
        files[tp] = g
        tr, _, out = train_run(tp, ["--data", t, "--steps", "2", "--grad-clip",
                                    "0.01", "--dump-grads", g],
                               variant="grads", what=f"tp{tp}: --dump-grads")
        if not check(os.path.exists(g) and not os.path.exists(g + ".tmp"),
                     f"tp{tp}: grads file written"):
            continue
        grads, meta = saved(g)
        check(set(grads) == set(MOCK_PARAMS) and
              all(grads[n].shape == s for n, s in MOCK_PARAMS.items()),
              f"tp{tp}: parameter names, checkpoint shapes")
        check(meta.get("step") == "0", f"tp{tp}: metadata step 0")
        params_equal({n: tr[0].get("mock.grad." + n) for n in MOCK_PARAMS} if tr else {},
                     grads, f"tp{tp}: dumped grads == the unclipped grads the "
                     "mock computed at step 0 (bitwise)")
        check(len(tr) == 2 and len(train_printed(out)) == 2, "training goes on")
    if all(os.path.exists(f) for f in files.values()):
        check(open(files[1], "rb").read() == open(files[2], "rb").read(),
              "tp1 and tp2 grads files byte-identical")
    for tp in (1, 2):
        expect_fail(command(tp, ["--data", t, "--dump-grads",
                                 os.path.join(TMP, "g.st")]),
                    r"--dump-grads: .*mock_step_tp\d\.so has no gradient "
                    r"outputs; compile with --export-grads",
                    what=f"tp{tp}: --dump-grads without grad args", code=1)


def case_val_data():
    t = token_file(np.arange(60) % VOCAB)
    vt = np.random.default_rng(3).integers(0, VOCAB, 31)
    v = token_file(vt, "val.bin")
    log = os.path.join(TMP, "train.jsonl")
    args = ["--data", t, "--steps", "5", "--val-data", v, "--val-every", "2",
            "--val-steps", "3", "--lr", "0.01"]
    tr, fwd, out = train_run(2, args + ["--log", log], what="tp2 --val-data")
    vals = val_printed(out)
    check([s for s, _ in vals] == ["2", "4", "5"],
          f"validation after 2, 4 updates and at the end ({vals})")
    check(len(fwd) == 9, "3 batches per validation")
    ti = tokens_io()
    ok = all(np.array_equal(fwd[3 * k + j]["input_ids"],
                            ti.batch(vt, j, B, T)[0].reshape(-1))
             for k in range(3) for j in range(3)) if len(fwd) == 9 else False
    check(ok, "validation batches 0..2 of the val file")
    if len(fwd) == 9:
        want = [np.float32(sum(float(mock_checksum(fwd[3 * k + j])) for j in range(3)) / 3)
                for k in range(3)]
        check([f32(x) for _, x in vals] == want,
              f"val loss == mean of mgt_forward over the batches ({want})")
        check(all(np.array_equal(fwd[3 * k][n], tr[u][n]) if u < 5 else True
                  for k, u in ((0, 2), (1, 4)) for n in MOCK_PARAMS),
              "validation sees the weights the next train step starts from")
    plain = train_printed(expect_ok(command(2, args[:4] + ["--lr", "0.01"]),
                                    what="same training without validation"))
    check(train_printed(out) == plain, "validation does not change training")
    try:
        lines = [json.loads(l) for l in open(log)]
    except (OSError, ValueError) as e:
        check(False, f"log readable ({e})")
        return
    steps = [l for l in lines if "loss" in l]
    check([l["step"] for l in steps] == [0, 1, 2, 3, 4] and
          all(set(l) == {"step", "loss", "ms", "tokens_per_s", "grad_norm", "lr",
                         "exposed_comm_ms"} and
              0 <= l["exposed_comm_ms"] <= l["ms"]
              for l in steps), "train log lines: step, loss, ms, tokens_per_s, "
          "grad_norm, lr, exposed_comm_ms (within the step's time)")
    check(all(np.float32(l["loss"]) == f32(p[1]) and
              np.float32(l["grad_norm"]) == f32(p[2]) and
              np.float32(l["lr"]) == f32(p[3])
              for l, p in zip(steps, train_printed(out))), "logged == printed")
    vl = [l for l in lines if "val_loss" in l]
    check([(str(l["step"]), np.float32(l["val_loss"])) for l in vl] ==
          [(s, f32(x)) for s, x in vals], "val log lines {step, val_loss}")
    expect_fail(command(2, ["--data", t, "--val-data",
                            token_file([1, 2, 3], "short.bin")]),
                r"data .*short\.bin: 3 tokens, fewer than the 7",
                what="val file too short")


def case_train_errors():
    t = token_file(np.arange(40) % VOCAB)
    st = safetensors_io()
    params = random_params(9)
    p = os.path.join(TMP, "weights_only.safetensors")
    st.write_safetensors(p, params, metadata={"step": "2"})
    expect_fail(command(2, ["--data", t, "--steps", "4", "--resume", p]),
                r'tensor "optimizer\.\S+\.exp_avg(_sq)?" is missing: --resume '
                r"needs the AdamW state", what="--resume file without optimizer "
                "tensors", code=None)
    full = dict(params)
    for n, a in params.items():
        m_, v_ = optimizer_names(n)
        full[m_] = np.zeros_like(a)
        full[v_] = np.zeros_like(a)
    p = os.path.join(TMP, "no_step.safetensors")
    st.write_safetensors(p, full)
    expect_fail(command(2, ["--data", t, "--resume", p]),
                r'no "step" in its __metadata__', what="--resume file without step")
    p = os.path.join(TMP, "ok.safetensors")
    st.write_safetensors(p, full, metadata={"step": "1"})
    tr, _, out = train_run(2, ["--data", t, "--steps", "2", "--resume", p],
                           what="a hand-written resume file")
    params_equal(tr[0] if tr else {}, params, "... loads its weights")
    check([x[0] for x in train_printed(out)] == ["1"], "... and runs step 1")
    expect_fail(command(2, ["--data", t, "--resume",
                            os.path.join(TMP, "nope.safetensors")]),
                r"checkpoint .*nope\.safetensors: cannot open", what="missing resume file")
    env = {"MOCK_EXIT_RANK": "1"}
    expect_fail(command(2, ["--data", t, "--steps", "3"], env),
                r"mock_step: rank 1 exits in mgt_train_step", env=env,
                what="rank 1 dies in mgt_train_step")


def logits_reference(tokens, step):
    """The logits the mock's mgt_forward writes for batch `step`, restricted
    to the valid vocabulary: (float)(b*1000 + t + 100*input_ids[b,t] +
    0.001*v) in double, as in mock_step.c."""
    inp, _ = tokens_io().batch(tokens, step, B, T)
    ref = np.empty((B, T, VOCAB), np.float32)
    for b in range(B):
        for t in range(T):
            for v in range(VOCAB):
                ref[b, t, v] = np.float32(b * 1000.0 + t + 100.0 * int(inp[b, t])
                                          + 0.001 * v)
    return ref


def st_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def case_dump_logits():
    tokens = np.random.default_rng(5).integers(0, VOCAB, 50)
    t = token_file(tokens)
    steps = 3
    want = [logits_reference(tokens, s) for s in range(steps)]
    files = {}
    for tp in (1, 2):
        path = os.path.join(TMP, f"logits_tp{tp}.safetensors")
        rc, out, err, _ = run(command(tp, ["--data", t, "--eval-only", "--steps",
                                           str(steps), "--dump-logits", path],
                                      variant="logits"))
        if not check(rc == 0, f"tp{tp}: --eval-only --dump-logits exits 0"):
            print("    " + (out + err).replace("\n", "\n    "))
            continue
        check(len(steps_printed(out)) == steps, f"tp{tp}: {steps} losses printed")
        plain = expect_ok(command(tp, ["--data", t, "--eval-only", "--steps",
                                       str(steps)], variant="eval"),
                          what=f"tp{tp}: same run without logits")
        check(steps_printed(out) == steps_printed(plain),
              f"tp{tp}: the logits output does not change the losses")
        check(re.search(r"wrote the logits of 3 step\(s\) to .*logits_tp\d", err)
              is not None, f"tp{tp}: reports the file")
        if not check(os.path.exists(path) and not os.path.exists(path + ".tmp"),
                     f"tp{tp}: file written, no .tmp left"):
            continue
        files[tp] = path
        header = st_header(path)
        meta = header.pop("__metadata__", {})
        names = [f"logits.{s}" for s in range(steps)]
        check(list(header) == names and
              all(h["dtype"] == "F32" and h["shape"] == [B, T, VOCAB]
                  for h in header.values()),
              f"tp{tp}: tensors logits.0..{steps - 1}, F32 [{B}, {T}, {VOCAB}] "
              "(padding columns dropped)")
        check(meta.get("steps") == str(steps) and meta.get("model") == "mock",
              f"tp{tp}: metadata ({meta})")
        got = saved(path)[0]
        check(all(n in got and got[n].dtype == np.float32 and
                  got[n].shape == want[s].shape and
                  np.array_equal(got[n].view(np.uint32), want[s].view(np.uint32))
                  for s, n in enumerate(names)),
              f"tp{tp}: logits.<s> == the global logits of batch s (bitwise)")
    if len(files) == 2:
        check(open(files[1], "rb").read() == open(files[2], "rb").read(),
              "tp1 and tp2 logits files byte-identical")
    # Weights from a checkpoint: the logits arg is not read from it.
    ck = write_st(os.path.join(TMP, "w.safetensors"),
                  hf_checkpoint(random_params(4)))
    p = os.path.join(TMP, "logits_init.safetensors")
    expect_ok(command(2, ["--data", t, "--eval-only", "--init-from", ck,
                          "--dump-logits", p], variant="logits"),
              what="tp2: --init-from a checkpoint without logits")
    check(os.path.exists(p) and
          np.array_equal(saved(p)[0].get("logits.0"), want[0]),
          "... writes the logits")
    # Errors.
    for tp in (1, 2):
        expect_fail(command(tp, ["--data", t, "--eval-only", "--dump-logits",
                                 os.path.join(TMP, "l.st")], variant="eval"),
                    r"--dump-logits: .*mock_step_tp\d_eval\.so has no logits "
                    r"output; compile with --export-logits",
                    what=f"tp{tp}: --dump-logits without a logits arg", code=1)
        expect_fail(command(tp, ["--data", t, "--dump-logits",
                                 os.path.join(TMP, "l.st")], variant="logits"),
                    r"--dump-logits needs --eval-only",
                    what=f"tp{tp}: --dump-logits without --eval-only",
                    code=2 if tp == 1 else None)
    check(not os.path.exists(os.path.join(TMP, "l.st")), "... no file")
    bad = os.path.join(TMP, "no", "such", "dir", "l.safetensors")
    expect_fail(command(2, ["--data", t, "--eval-only", "--dump-logits", bad],
                        variant="logits"),
                r"rank 0: cannot write .*l\.safetensors\.tmp: No such file",
                what="tp2: --dump-logits into a missing directory", code=1)
    d = os.path.join(TMP, "ldir")
    os.mkdir(d)
    out = expect_fail(command(2, ["--data", t, "--eval-only", "--steps", "2",
                                  "--dump-logits", d], variant="logits"),
                      r"cannot rename .*ldir\.tmp to .*ldir: ",
                      what="tp2: --dump-logits onto a directory", code=1)
    check(len(steps_printed(out)) == 2 and os.path.isdir(d) and
          not os.path.exists(d + ".tmp"),
          "... after the steps; no .tmp left, the directory untouched")


def case_device_args():
    """A step whose arguments live in device memory (a CUDA step, played by
    the device mock): megatron-run uploads the weights and every batch,
    downloads before saving, and trains exactly as with host memory."""
    t = token_file(np.arange(60) % VOCAB)
    for tp in (1, 2):
        runs = {}
        for variant in ("", "device"):
            path = os.path.join(TMP, f"device_{variant or 'host'}_tp{tp}.safetensors")
            _, fwd, out = train_run(tp, ["--data", t, "--steps", "3", "--lr", "0.01",
                                         "--val-data", t, "--save", path],
                                    variant=variant,
                                    what=f"tp{tp} {variant or 'host'}: train 3 steps, --save")
            runs[variant] = (train_printed(out), val_printed(out), fwd,
                             saved(path)[0] if os.path.exists(path) else {})
        host, device = runs[""], runs["device"]
        check(host[0] and host[0] == device[0],
              f"tp{tp}: device-memory training prints the host run's losses and norms")
        check(host[1] == device[1], f"tp{tp}: same validation losses")
        same_dumps = (len(host[2]) == len(device[2]) > 0 and
                      all(set(h) == set(d) and
                          all(np.array_equal(h[n], d[n]) for n in h)
                          for h, d in zip(host[2], device[2])))
        check(same_dumps, f"tp{tp}: every forward call saw the host run's "
                          "weights and batches")
        check(set(host[3]) == set(device[3]) and
              all(np.array_equal(host[3][n], device[3][n]) for n in host[3]),
              f"tp{tp}: the saved checkpoint is bitwise the host run's")
    expect_fail([A.megatron_run, A.mock_tp1_device_cpu, "--data", t, "--steps", "1"],
                r"keeps arguments in device memory, but its runtime has no "
                r"mrt_device_alloc", what="device manifest, CPU runtime", code=1)


CASES = {name[5:]: fn for name, fn in globals().items()
         if name.startswith("case_")}


def main():
    global A, TMP
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--megatron-run", required=True)
    ap.add_argument("--mock-tp1", required=True)
    ap.add_argument("--mock-tp2", required=True)
    for tp in (1, 2):
        for variant in ("grads", "eval", "logits", "device"):
            ap.add_argument(f"--mock-tp{tp}-{variant}", required=True)
    ap.add_argument("--mock-tp1-device-cpu", required=True)
    ap.add_argument("--no-runtime-step", required=True)
    ap.add_argument("--rt-lib", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--reference-dir", required=True)
    A = ap.parse_args()
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory(prefix="megatron-run-") as tmp:
        TMP = tmp
        print(f"case {A.case}")
        CASES[A.case]()
    if FAILURES:
        print(f"FAILED: {len(FAILURES)} check(s)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
