"""What the references' command lines share (gpt2_reference/reference.py,
llama_reference/reference.py): the eval, grads and train subcommands'
options, the sampling options of generate, and the timing line."""
import sys
import time

import numpy as np


def add_training_commands(sub, common, cmd_eval, cmd_grads, cmd_train):
    """The eval, grads and train subparsers; common(p) adds the model's and
    the data's options."""
    p = sub.add_parser("eval", help="loss per step with fixed params")
    common(p)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--start-step", type=int, default=0)
    p.add_argument("--dump-logits", default=None,
                   help=".npy file; float32 [steps,B,T,Vp] (padded columns "
                        "included; slice [..., :valid_vocab] for the real ones)")
    p.set_defaults(fn=cmd_eval)
    p = sub.add_parser("grads", help="gradients of one step's loss")
    common(p)
    p.add_argument("--step", type=int, default=0)
    p.add_argument("--steps", type=int, default=None, help="ignored")
    p.add_argument("--out", required=True)
    p.set_defaults(fn=cmd_grads)
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
    p.set_defaults(fn=cmd_train)


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
