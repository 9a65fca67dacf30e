"""Pure-JAX GPT-2 reference (float32) with Hugging Face names / Conv1D layout.

params: {canonical HF name: array} as returned by safetensors_io.load_gpt2,
e.g. "wte.weight" [Vp,C], "h.0.attn.c_attn.weight" [C,3C] (y = x @ W + b).
"""
import math

import jax

jax.config.update("jax_enable_x64", False)
# Full fp32 matmuls everywhere (also what jax.default_matmul_precision("highest")
# does as a context manager); on CPU this is the default anyway.
jax.config.update("jax_default_matmul_precision", "highest")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

LN_EPS = 1e-5


def n_layers(params):
    return sum(1 for n in params if n.endswith(".ln_1.weight"))


def layer_norm(x, w, b):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mu), axis=-1, keepdims=True)  # biased
    return (x - mu) * jax.lax.rsqrt(var + LN_EPS) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi)
                                     * (x + 0.044715 * x * x * x)))


def attention(qkv, heads):
    """qkv [B,T,3C] -> [B,T,C]; causal, scale 1/sqrt(D)."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    D = C // heads
    q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
    # head h = columns h*D:(h+1)*D of each section
    q = q.reshape(B, T, heads, D).transpose(0, 2, 1, 3)
    k = k.reshape(B, T, heads, D).transpose(0, 2, 1, 3)
    v = v.reshape(B, T, heads, D).transpose(0, 2, 1, 3)
    s = jnp.einsum("bhtd,bhsd->bhts", q, k) * (1.0 / math.sqrt(D))
    mask = jnp.tril(jnp.ones((T, T), dtype=bool))
    s = jnp.where(mask, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    y = jnp.einsum("bhts,bhsd->bhtd", p, v)
    return y.transpose(0, 2, 1, 3).reshape(B, T, C)


def forward(params, ids, heads):
    """ids [B,T] int -> logits [B,T,Vp] (all rows of wte, padded included)."""
    L = n_layers(params)
    T = ids.shape[1]
    x = params["wte.weight"][ids] + params["wpe.weight"][:T][None]
    for i in range(L):
        p = f"h.{i}."
        h = layer_norm(x, params[p + "ln_1.weight"], params[p + "ln_1.bias"])
        qkv = h @ params[p + "attn.c_attn.weight"] + params[p + "attn.c_attn.bias"]
        a = attention(qkv, heads)
        x = x + (a @ params[p + "attn.c_proj.weight"] + params[p + "attn.c_proj.bias"])
        h = layer_norm(x, params[p + "ln_2.weight"], params[p + "ln_2.bias"])
        h = gelu_tanh(h @ params[p + "mlp.c_fc.weight"] + params[p + "mlp.c_fc.bias"])
        x = x + (h @ params[p + "mlp.c_proj.weight"] + params[p + "mlp.c_proj.bias"])
    x = layer_norm(x, params["ln_f.weight"], params["ln_f.bias"])
    return x @ params["wte.weight"].T


def loss_and_logits(params, ids, targets, heads, valid_vocab):
    """Mean cross-entropy over all B*T tokens, using only the first
    valid_vocab logits (padded ones never enter the softmax).
    Returns (loss scalar, logits [B,T,Vp])."""
    logits = forward(params, ids, heads)
    lv = logits[..., :valid_vocab]
    lse = jax.nn.logsumexp(lv, axis=-1)
    tgt = jnp.take_along_axis(lv, targets[..., None], axis=-1)[..., 0]
    return jnp.mean(lse - tgt), logits


def loss_fn(params, ids, targets, heads, valid_vocab):
    return loss_and_logits(params, ids, targets, heads, valid_vocab)[0]


_loss_and_logits_jit = jax.jit(loss_and_logits, static_argnums=(3, 4))
_value_and_grad_jit = jax.jit(jax.value_and_grad(loss_fn), static_argnums=(3, 4))


def to_jax(params):
    return {n: jnp.asarray(v, dtype=jnp.float32) for n, v in params.items()}


def eval_loss(params, ids, targets, heads, valid_vocab):
    """Jitted (loss, logits)."""
    return _loss_and_logits_jit(params, jnp.asarray(ids, jnp.int32),
                                jnp.asarray(targets, jnp.int32), heads, valid_vocab)


def grads(params, ids, targets, heads, valid_vocab):
    """(loss, {name: dloss/dparam}) by jax.grad (jitted)."""
    return _value_and_grad_jit(params, jnp.asarray(ids, jnp.int32),
                               jnp.asarray(targets, jnp.int32), heads, valid_vocab)


# --------------------------------------------------------------------------
# torch.optim.AdamW + torch.nn.utils.clip_grad_norm_
# --------------------------------------------------------------------------
def decays(name, shape):
    """Weight decay only for 2-D weights (wte, wpe, c_attn/c_proj/c_fc)."""
    return len(shape) == 2


def clip_grads(g, max_norm):
    """torch.nn.utils.clip_grad_norm_(norm_type=2): total_norm = ||per-tensor
    norms||_2; coef = max_norm / (total_norm + 1e-6) clamped to <= 1; grads *= coef.
    max_norm None or <= 0 disables clipping. Returns (grads, total_norm)."""
    norms = jnp.stack([jnp.linalg.norm(v.reshape(-1)) for v in g.values()])
    total = jnp.linalg.norm(norms)
    if max_norm is None or max_norm <= 0:
        return g, total
    coef = jnp.minimum(jnp.float32(max_norm) / (total + jnp.float32(1e-6)),
                       jnp.float32(1.0))
    return {n: v * coef for n, v in g.items()}, total


def adamw_update(p, g, m, v, step_size, bc2_sqrt, beta1, beta2, eps, decay):
    """One torch.optim.AdamW step for one tensor (single-tensor CPU path,
    amsgrad=False, maximize=False), with torch's operation order.
    step_size = lr / (1 - beta1**t) and bc2_sqrt = sqrt(1 - beta2**t) are
    formed in Python double (as torch does) and enter as fp32 scalars;
    decay = 1 - lr*wd (or None for no weight decay)."""
    f32 = jnp.float32
    if decay is not None:
        p = p * decay                                  # param.mul_(1 - lr*wd)
    m = m + f32(1.0 - beta1) * (g - m)                 # exp_avg.lerp_(grad, 1-beta1)
    v = v * f32(beta2) + f32(1.0 - beta2) * g * g      # exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2)
    denom = jnp.sqrt(v) / bc2_sqrt + f32(eps)          # (sqrt(v) / bc2_sqrt).add_(eps)
    p = p + (-step_size * m) / denom                   # param.addcdiv_(m, denom, value=-step_size)
    return p, m, v


def make_adamw_step(loss_of, beta1, beta2, eps, weight_decay, grad_clip):
    """A jitted step of AdamW on loss_of(params, ids, targets): the loss and
    its gradients, global-norm clipping, the update (any model's)."""
    def step_fn(params, m, v, ids, targets, step_size, bc2_sqrt, decay):
        loss, g = jax.value_and_grad(loss_of)(params, ids, targets)
        g, norm = clip_grads(g, grad_clip)
        newp, newm, newv = {}, {}, {}
        for n in params:
            d = decay if (weight_decay and decays(n, params[n].shape)) else None
            newp[n], newm[n], newv[n] = adamw_update(
                params[n], g[n], m[n], v[n], step_size, bc2_sqrt,
                beta1, beta2, eps, d)
        return newp, newm, newv, loss, norm
    return jax.jit(step_fn)


def run_adamw(step_fn, params, batches, steps, lr, beta1, beta2, weight_decay,
              return_params):
    """`steps` steps of make_adamw_step's step_fn from params (jax arrays);
    the losses and pre-clipping gradient norms, and the final params when
    return_params."""
    get = batches if callable(batches) else (lambda s: batches[s])
    m = {n: jnp.zeros_like(x) for n, x in params.items()}
    v = {n: jnp.zeros_like(x) for n, x in params.items()}
    decay = jnp.float32(1.0 - lr * weight_decay)
    losses, norms = [], []
    for s in range(steps):
        t = s + 1
        step_size = jnp.float32(lr / (1.0 - beta1 ** t))
        bc2_sqrt = jnp.float32(math.sqrt(1.0 - beta2 ** t))
        ids, tg = get(s)
        params, m, v, loss, norm = step_fn(
            params, m, v, jnp.asarray(ids, jnp.int32), jnp.asarray(tg, jnp.int32),
            step_size, bc2_sqrt, decay)
        losses.append(float(loss))
        norms.append(float(norm))
    if return_params:
        return losses, norms, {n: np.asarray(x) for n, x in params.items()}
    return losses, norms


def adamw_train(params, batches, steps, lr, beta1=0.9, beta2=0.999, eps=1e-8,
                weight_decay=0.0, grad_clip=None, heads=None, valid_vocab=None,
                return_params=False):
    """Train `steps` steps with torch.optim.AdamW semantics.

    batches: callable step -> (ids, targets), or a sequence indexed by step.
    weight_decay is decoupled (p *= 1 - lr*wd before the Adam update) and only
    applied to 2-D weights; grads are clipped like clip_grad_norm_(grad_clip).
    Returns (losses, grad_norms) as lists of Python floats -- loss and
    pre-clipping total grad norm at each step, before that step's update --
    plus the final params when return_params.
    """
    if heads is None:
        raise ValueError("heads is required")
    params = to_jax(params)
    if valid_vocab is None:
        valid_vocab = int(params["wte.weight"].shape[0])
    step_fn = make_adamw_step(
        lambda p, ids, tg: loss_fn(p, ids, tg, heads, int(valid_vocab)),
        float(beta1), float(beta2), float(eps), float(weight_decay), grad_clip)
    return run_adamw(step_fn, params, batches, steps, lr, beta1, beta2,
                     weight_decay, return_params)
