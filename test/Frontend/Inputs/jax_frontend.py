#!/usr/bin/env python3
"""JAX programs as megatron-compile takes them, with their inputs and JAX's
own outputs.

usage: jax_frontend.py PROGRAM --mesh tp=2 [--mesh dp=2] --out-dir DIR

PROGRAM is one of the programs below, each a function, its example
arguments and a PartitionSpec (or None) per argument. Writes into DIR:

  PROGRAM.mlir          the jitted function lowered by JAX to StableHLO and by
                        IREE's input pipeline (iree-compile
                        --iree-input-type=stablehlo --compile-to=input) to
                        linalg on tensors, with IREE's util.func / util.return
                        renamed to func.func / func.return, a `tp.mesh @mesh`
                        of the --mesh axes, and each argument's JAX
                        PartitionSpec written as its `tp.sharding`
                        (an argument without one is left to the planner)
  inputs.safetensors    the arguments, named arg0, arg1, ... by position
  expected.safetensors  JAX's results, named result0, result1, ...

The shardings are the frontend's input (what a framework states with
jax.jit(in_shardings=...)); IREE drops JAX's own sharding attributes, so
they are carried over here.
"""

import argparse
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P
from safetensors.numpy import save_file

jax.config.update("jax_platforms", "cpu")


# ---- Programs: (function, example arguments, PartitionSpec per argument) --

def _gelu(x):
    return jax.nn.gelu(x, approximate=True)


def _normal(key, shape, scale):
    return np.array(jax.random.normal(key, shape, jnp.float32) * scale)


def mlp_arguments(seed=0, batch=8, width=16, hidden=64):
    keys = jax.random.split(jax.random.PRNGKey(seed), 5)
    return [_normal(keys[0], (batch, width), 1.0),
            _normal(keys[1], (width, hidden), 0.2),
            _normal(keys[2], (hidden,), 0.1),
            _normal(keys[3], (hidden, width), 0.2),
            _normal(keys[4], (width,), 0.1)]


def mlp(x, w1, b1, w2, b2):
    """Megatron's MLP forward."""
    return _gelu(x @ w1 + b1) @ w2 + b2


def mlp_sgd_arguments(seed=0):
    x, w1, b1, w2, b2 = mlp_arguments(seed)
    y = _normal(jax.random.PRNGKey(seed + 1), x.shape, 1.0)
    return [x, y, w1, b1, w2, b2]


def mlp_sgd(x, y, w1, b1, w2, b2):
    """One SGD step of the MLP on a mean squared error: the loss and the
    updated weights (the backward pass is JAX's own)."""
    def loss_of(params):
        return jnp.mean((mlp(x, *params) - y) ** 2)
    params = (w1, b1, w2, b2)
    loss, grads = jax.value_and_grad(loss_of)(params)
    return (loss, *[p - 0.1 * g for p, g in zip(params, grads)])


def _layer_norm(x, gain, bias):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * gain + bias


HEADS = 4


def block_arguments(seed=0, batch=2, seq=8, width=32):
    head = width // HEADS
    shapes = {
        "x": ((batch, seq, width), 1.0), "y": ((batch, seq, width), 1.0),
        "ln1_g": ((width,), 0.1), "ln1_b": ((width,), 0.1),
        "w_qkv": ((width, 3, HEADS, head), 0.2),
        "b_qkv": ((3, HEADS, head), 0.1),
        "w_o": ((HEADS, head, width), 0.2), "b_o": ((width,), 0.1),
        "ln2_g": ((width,), 0.1), "ln2_b": ((width,), 0.1),
        "w1": ((width, 4 * width), 0.2), "b1": ((4 * width,), 0.1),
        "w2": ((4 * width, width), 0.2), "b2": ((width,), 0.1),
    }
    keys = jax.random.split(jax.random.PRNGKey(seed), len(shapes))
    args = [_normal(k, shape, scale)
            for k, (shape, scale) in zip(keys, shapes.values())]
    # Gains near 1, as a trained model's.
    for gain in ("ln1_g", "ln2_g"):
        args[list(shapes).index(gain)] += 1.0
    return args


def block(x, ln1_g, ln1_b, w_qkv, b_qkv, w_o, b_o, ln2_g, ln2_b, w1, b1, w2,
          b2):
    """A pre-LayerNorm transformer block: causal attention with heads
    (q, k and v of each head side by side in w_qkv), then the MLP."""
    seq = x.shape[1]
    qkv = jnp.einsum("btd,dchk->btchk", _layer_norm(x, ln1_g, ln1_b),
                     w_qkv) + b_qkv
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    scores = jnp.einsum("bthk,bshk->bhts", q, k) / np.sqrt(q.shape[-1])
    causal = jnp.tril(jnp.ones((seq, seq), bool))
    scores = jnp.where(causal, scores, -1e9)
    attended = jnp.einsum("bhts,bshk->bthk", jax.nn.softmax(scores, axis=-1),
                          v)
    x = x + jnp.einsum("bthk,hkd->btd", attended, w_o) + b_o
    return x + mlp(_layer_norm(x, ln2_g, ln2_b), w1, b1, w2, b2)


def block_sgd(x, y, *params):
    """One SGD step of the block on a mean squared error."""
    def loss_of(params):
        return jnp.mean((block(x, *params) - y) ** 2)
    loss, grads = jax.value_and_grad(loss_of)(params)
    return (loss, *[p - 0.1 * g for p, g in zip(params, grads)])


# Megatron's block from two annotations: the heads of q, k and v, and the
# first MLP weight's columns.
BLOCK_SPECS = [None, None, None, None, P(None, None, "tp"), None, None, None,
               None, None, P(None, "tp"), None, None, None]


# Only the first weight is annotated, split by columns (None: no
# annotation); the planner finds the rest: the bias split with it, the
# row-split second weight, one all-reduce.
MLP_SPECS = [None, P(None, "tp"), None, None, None]

PROGRAMS = {
    "mlp": (mlp, mlp_arguments, MLP_SPECS),
    "mlp_sgd": (mlp_sgd, mlp_sgd_arguments, [None, None] + MLP_SPECS[1:]),
    # Data and tensor parallelism: the batch split over "dp" too.
    "mlp_sgd_dp": (mlp_sgd, mlp_sgd_arguments,
                   [P("dp"), P("dp")] + MLP_SPECS[1:]),
    "block_sgd": (block_sgd, block_arguments, BLOCK_SPECS),
}


# ---- Lowering ------------------------------------------------------------

def to_stablehlo(fn, args):
    return jax.jit(fn).lower(*args).as_text()


def to_linalg(stablehlo, work_dir):
    """IREE's input pipeline: StableHLO to linalg on tensors in util.func."""
    source = os.path.join(work_dir, "stablehlo.mlir")
    with open(source, "w") as f:
        f.write(stablehlo)
    return subprocess.run(
        ["iree-compile", "--iree-input-type=stablehlo", "--compile-to=input",
         source], check=True, capture_output=True, text=True).stdout


def axes_of(spec_entry):
    if spec_entry is None:
        return []
    if isinstance(spec_entry, str):
        return [spec_entry]
    return list(spec_entry)


def sharding_attr(spec, rank):
    dims = [axes_of(spec[d]) if d < len(spec) else [] for d in range(rank)]
    text = ", ".join("[" + ", ".join(f'"{a}"' for a in axes) + "]"
                     for axes in dims)
    return f"#tp.sharding<@mesh, [{text}]>"


def split_top_level(text):
    """Splits at commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "<({[":
            depth += 1
        elif c in ">)}]":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def annotate(linalg, mesh, specs, args):
    """func.func for util.func, the mesh, and each argument's tp.sharding."""
    text = re.sub(r"\butil\.func\s+(public\s+)?", "func.func ", linalg)
    text = re.sub(r"\butil\.return\b", "func.return", text)
    header = re.search(r"func\.func @main\(", text)
    if not header:
        sys.exit("jax_frontend: no @main in IREE's output")
    start, depth = header.end(), 1
    end = start
    while depth:
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    params = split_top_level(text[start:end - 1])
    if len(params) != len(args):
        sys.exit(f"jax_frontend: @main has {len(params)} arguments, "
                 f"the program {len(args)}")
    annotated = []
    for param, spec, arg in zip(params, specs, args):
        if spec is None:
            annotated.append(param)
            continue
        if "{" in param:
            sys.exit(f"jax_frontend: argument '{param}' already has "
                     "attributes")
        annotated.append(
            f"{param} {{tp.sharding = {sharding_attr(spec, arg.ndim)}}}")
    text = text[:start] + ", ".join(annotated) + text[end - 1:]
    axes = ", ".join(f'"{name}" = {size}' for name, size in mesh)
    return re.sub(r"(module[^{]*\{)", rf'\1\n  tp.mesh @mesh axes = [{axes}]',
                  text, count=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program", choices=sorted(PROGRAMS))
    parser.add_argument("--mesh", action="append", required=True,
                        help="an axis NAME=SIZE (dp before tp)")
    parser.add_argument("--out-dir", required=True)
    opts = parser.parse_args()
    mesh = []
    for axis in opts.mesh:
        name, _, size = axis.partition("=")
        mesh.append((name, int(size)))
    fn, make_args, specs = PROGRAMS[opts.program]
    args = make_args()
    os.makedirs(opts.out_dir, exist_ok=True)
    linalg = to_linalg(to_stablehlo(fn, args), opts.out_dir)
    with open(os.path.join(opts.out_dir, opts.program + ".mlir"), "w") as f:
        f.write(annotate(linalg, mesh, specs, args))
    save_file({f"arg{i}": np.array(a, np.float32)
               for i, a in enumerate(args)},
              os.path.join(opts.out_dir, "inputs.safetensors"))
    results = jax.jit(fn)(*args)
    if not isinstance(results, (tuple, list)):
        results = [results]
    save_file({f"result{i}": np.array(r, np.float32)
               for i, r in enumerate(jax.tree_util.tree_leaves(results))},
              os.path.join(opts.out_dir, "expected.safetensors"))


if __name__ == "__main__":
    main()
