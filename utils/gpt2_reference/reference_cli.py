"""What the references' command lines share (gpt2_reference/reference.py,
llama_reference/reference.py): the eval, grads and train subcommands, the
sampling options of generate, and the timing line. A reference gives them
its model as a Family."""
import collections
import sys
import time

import numpy as np

from tokens_io import batch

# A checkpoint as a reference loaded it for the commands: its params, the
# model's config (whatever the family's functions take), the valid
# vocabulary, the tokens, how to save tensors under the checkpoint's names
# (save(path, tensors, metadata)), the config as gradient-file metadata, and
# the checkpoint's own metadata.
Loaded = collections.namedtuple(
    "Loaded", "params cfg valid_vocab tokens save config_metadata metadata")

# A model's functions: load(args) -> Loaded; to_jax(params);
# eval_loss(jp, ids, targets, cfg, valid_vocab) -> (loss, logits);
# grads(jp, ids, targets, cfg, valid_vocab) -> (loss, grads);
# train(params, batches, steps, cfg, valid_vocab, return_params, **adamw)
# -> (losses, grad_norms[, params]).
Family = collections.namedtuple("Family",
                                "load to_jax eval_loss grads train")


def cmd_eval(family, a):
    t0 = time.perf_counter()
    m = family.load(a)
    jp = family.to_jax(m.params)
    dumps, times = [], []
    for s in range(a.start_step, a.start_step + a.steps):
        ids, tg = batch(m.tokens, s, a.batch, a.seq)
        t1 = time.perf_counter()
        loss, logits = family.eval_loss(jp, ids, tg, m.cfg, m.valid_vocab)
        loss = float(loss)
        times.append(time.perf_counter() - t1)
        print(f"step {s} loss {loss!r}", flush=True)
        if a.dump_logits:
            dumps.append(np.asarray(logits))
    if a.dump_logits:
        np.save(a.dump_logits, np.stack(dumps))
    if a.timing:
        timing(t0, times)


def cmd_grads(family, a):
    t0 = time.perf_counter()
    m = family.load(a)
    ids, tg = batch(m.tokens, a.step, a.batch, a.seq)
    t1 = time.perf_counter()
    loss, g = family.grads(family.to_jax(m.params), ids, tg, m.cfg,
                           m.valid_vocab)
    loss = float(loss)
    times = [time.perf_counter() - t1]
    print(f"step {a.step} loss {loss!r}", flush=True)
    m.save(a.out, {n: np.asarray(g[n]) for n in m.params},
           {"what": "gradients", "step": a.step, "loss": repr(loss),
            "batch": a.batch, "seq": a.seq, **m.config_metadata,
            "valid_vocab": m.valid_vocab})
    if a.timing:
        timing(t0, times)


def cmd_train(family, a):
    t0 = time.perf_counter()
    m = family.load(a)
    res = family.train(
        m.params, lambda s: batch(m.tokens, a.start_step + s, a.batch, a.seq),
        a.steps, m.cfg, m.valid_vocab, bool(a.out), lr=a.lr, beta1=a.beta1,
        beta2=a.beta2, eps=a.eps, weight_decay=a.weight_decay,
        grad_clip=a.grad_clip)
    losses, norms = res[0], res[1]
    for s, (l, g) in enumerate(zip(losses, norms)):
        print(f"step {a.start_step + s} loss {l!r} grad_norm {g!r}")
    if a.out:
        m.save(a.out, res[2], m.metadata)
    if a.timing:
        print(f"# total {time.perf_counter() - t0:.3f}s for {a.steps} steps "
              f"(incl. load + jit)", file=sys.stderr)


def add_training_commands(sub, common, family):
    """The eval, grads and train subcommands of `family`; common(p) adds the
    model's and the data's options."""
    p = sub.add_parser("eval", help="loss per step with fixed params")
    common(p)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--start-step", type=int, default=0)
    p.add_argument("--dump-logits", default=None,
                   help=".npy file; float32 [steps,B,T,Vp] (padded columns "
                        "included; slice [..., :valid_vocab] for the real ones)")
    p.set_defaults(fn=lambda a: cmd_eval(family, a))
    p = sub.add_parser("grads", help="gradients of one step's loss")
    common(p)
    p.add_argument("--step", type=int, default=0)
    p.add_argument("--steps", type=int, default=None, help="ignored")
    p.add_argument("--out", required=True)
    p.set_defaults(fn=lambda a: cmd_grads(family, a))
    p = sub.add_parser("train", help="AdamW training (torch semantics)")
    common(p)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--start-step", type=int, default=0)
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--grad-clip", type=float, default=0.0,
                   help="clip_grad_norm_ max norm; <= 0 disables")
    p.add_argument("--out", default=None, help="save final params here")
    p.set_defaults(fn=lambda a: cmd_train(family, a))


def add_sampling_options(p):
    """generate's choice of each new token (sampling.py)."""
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1337)


def timing(t0, times):
    """The run's time to stderr: total, first step (with its jit), later
    steps' mean."""
    tot = time.perf_counter() - t0
    msg = f"# total {tot:.3f}s; first step (incl. jit) {times[0]:.3f}s"
    if len(times) > 1:
        msg += f"; later steps mean {1e3 * np.mean(times[1:]):.2f} ms"
    print(msg, file=sys.stderr)
