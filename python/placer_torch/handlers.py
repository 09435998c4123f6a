"""One handler per aten op: what placer nodes do its work. Each takes the lowering (`L`)
and the FX node, and returns the node's value: a `Val`, a list of them for a node of
several results (read by getitem), or a marker the op that consumes it resolves.

The forms a handler refuses (a transposed convolution, a softmax over an inner axis)
raise `Unsupported` naming the form, so the user sees exactly what placer lacks.
"""

from __future__ import annotations

import math

from .builder import SEED, Unsupported, Val, call, meta_dtype, meta_shape, name_seed, pair, ref

TABLE: dict = {}


def handles(*targets):
    def register(f):
        for t in targets:
            TABLE[f"aten.{t}"] = f
        return f

    return register


# -- convolution and pooling -----------------------------------------------------------


def _conv_attrs(n, stride, padding, dilation, transposed, groups) -> dict:
    if transposed:
        raise Unsupported(f"{n.target} (transposed)")
    if len(stride) != 2:
        raise Unsupported(f"{n.target} ({len(stride)}-d)")
    return {"stride": pair(stride), "padding": pair(padding), "dilation": pair(dilation), "groups": int(groups)}


@handles("convolution.default")
def convolution(L, n):
    x, w, b, stride, padding, dilation, transposed, _opad, groups = n.args
    attrs = _conv_attrs(n, stride, padding, dilation, transposed, groups)
    shape, dt = meta_shape(n), meta_dtype(n)
    inputs = [L.dense(x), L.dense(w)]
    if b is None:
        return L.b.emit(n.name, "conv2d", inputs, [(n.name, shape, dt)], attrs)[0]
    (y,) = L.b.emit(f"{n.name}.conv", "conv2d", inputs, [(f"{n.name}.conv", shape, dt)], attrs)
    return L.b.emit(n.name, "bias_add", [y, L.dense(b)], [(n.name, shape, dt)], {"axis": 1})[0]


@handles("convolution_backward.default")
def convolution_backward(L, n):
    dy, x, w, _bias_sizes, stride, padding, dilation, transposed, _opad, groups, mask = n.args
    attrs = _conv_attrs(n, stride, padding, dilation, transposed, groups)
    DY = L.dense(dy)
    out = [None, None, None]
    wanted = [m and i in L.getitems.get(n.name, {}) for i, m in enumerate(mask)]
    if wanted[0]:
        X = L.val(x)
        out[0] = L.b.emit(f"{n.name}.data", "conv2d_backward_data", [DY, L.dense(w)],
                          [(L.out_name(n, 0), X.shape, DY.dtype)], attrs)[0]
    if wanted[1]:
        W = L.val(w)
        out[1] = L.b.emit(f"{n.name}.filter", "conv2d_backward_filter", [L.dense(x), DY],
                          [(L.out_name(n, 1), W.shape, DY.dtype)], attrs)[0]
    if wanted[2]:
        out[2] = L.b.emit(f"{n.name}.bias", "bias_grad", [DY],
                          [(L.out_name(n, 2), (DY.shape[1],), DY.dtype)], {"axis": 1})[0]
    return out


def _pool_attrs(n, kernel, stride, padding, dilation, ceil_mode) -> dict:
    if pair(dilation) != [1, 1] or ceil_mode:
        raise Unsupported(f"{n.target} (dilation or ceil_mode)")
    return {"kernel": pair(kernel), "stride": pair(stride) if stride else pair(kernel), "padding": pair(padding)}


@handles("max_pool2d_with_indices.default")
def max_pool(L, n):
    args = list(n.args) + [[], 0, 1, False][len(n.args) - 2 :]
    x, kernel, stride, padding, dilation, ceil = args[:6]
    attrs = _pool_attrs(n, kernel, stride, padding, dilation, ceil)
    shape = tuple(int(d) for d in n.meta["val"][0].shape)
    return L.multi(n, "max_pool2d", [L.dense(x)], [shape, shape], ["activation", "workspace"], attrs)


@handles("max_pool2d_with_indices_backward.default")
def max_pool_backward(L, n):
    dy, x, kernel, stride, padding, dilation, ceil, indices = n.args
    attrs = _pool_attrs(n, kernel, stride, padding, dilation, ceil)
    X = L.val(x)
    return L.b.emit(n.name, "max_pool2d_backward", [L.dense(dy), L.dense(indices)],
                    [(n.name, X.shape, X.dtype)], attrs)[0]


@handles("mean.dim")
def mean(L, n):
    x, dims = n.args[0], n.args[1]
    X = L.dense(x)
    if len(X.shape) != 4 or sorted(d % 4 for d in dims) != [2, 3]:
        raise Unsupported(f"{n.target} (a mean other than over H and W of an NCHW tensor)")
    (y,) = L.b.emit(n.name, "global_avg_pool", [X], [(n.name, X.shape[:2], X.dtype)])
    return Val(y.name, y.base_shape, y.dtype, meta_shape(n))


@handles("expand.default")
def expand(L, n):
    x = L.val(n.args[0])
    shape = meta_shape(n)
    if math.prod(shape) == math.prod(x.shape):
        return L.view(n, x)
    users = list(n.users)
    # mean's backward: the gradient spread over H x W, then divided by H x W.
    if (len(shape) == 4 and math.prod(x.shape) == shape[0] * shape[1] and len(users) == 1
            and str(users[0].target) == "aten.div.Scalar" and users[0].args[1] == shape[2] * shape[3]):
        L.pending[n.name] = x
        return None
    raise Unsupported(f"{n.target} (a broadcast to a larger shape)")


# -- elementwise -----------------------------------------------------------------------


@handles("div.Scalar")
def div_scalar(L, n):
    x = L.pending.pop(n.args[0].name, None)
    if x is not None:
        dy = L.b.shaped(x, x.shape[:2] if len(x.shape) > 2 else x.shape, f"{n.name}.dy")
        shape = meta_shape(n)
        return L.b.emit(n.name, "global_avg_pool_backward", [dy], [(n.name, shape, dy.dtype)])[0]
    return L.scaled(n, 1.0 / float(n.args[1]))


@handles("mul.Scalar")
def mul_scalar(L, n):
    return L.scaled(n, float(n.args[1]))


def _binary(L, n, op):
    a, b = n.args[0], n.args[1]
    if not isinstance(b, type(a)):
        if op == "mul":
            return L.scaled(n, float(b))
        if op == "add" and n.kwargs.get("alpha", 1) == 1:
            x = L.val(a)
            s = L.b.scalar(f"{n.name}.scalar", float(b), x.dtype)
            return L.b.emit(n.name, "add", [L.dense(a), s], [(n.name, x.shape, x.dtype)])[0]
        raise Unsupported(f"{n.target} (with a number)")
    if n.kwargs.get("alpha", 1) != 1:
        raise Unsupported(f"{n.target} (alpha)")
    A, B = L.val(a), L.val(b)
    if A.perm == B.perm and A.base_shape == B.base_shape and A.perm is not None:
        (c,) = L.b.emit(n.name, op, [_base(A), _base(B)], [(n.name, A.base_shape, A.dtype)])
        return Val(c.name, c.base_shape, c.dtype, meta_shape(n), A.perm)
    A, B = L.dense(a), L.dense(b)
    if _broadcasts(B.shape, A.shape):
        first, second = A, B
    elif _broadcasts(A.shape, B.shape):
        first, second = B, A
    else:
        raise Unsupported(f"{n.target} (both operands broadcast)")
    return L.b.emit(n.name, op, [first, second], [(n.name, first.shape, first.dtype)])[0]


def _base(v: Val) -> Val:
    return Val(v.name, v.base_shape, v.dtype, v.base_shape)


def _broadcasts(small, big) -> bool:
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(reversed(small), reversed(big)))


@handles("add.Tensor")
def add(L, n):
    return _binary(L, n, "add")


@handles("mul.Tensor")
def mul(L, n):
    return _binary(L, n, "mul")


@handles("sum.dim_IntList")
def sum_dims(L, n):
    x = L.dense(n.args[0])
    rank = len(x.shape)
    dims = sorted({d % rank for d in n.args[1]})
    kept = [d for d in range(rank) if d not in dims]
    if len(kept) == 1:
        # Summing all axes but one is a bias's gradient.
        (y,) = L.b.emit(n.name, "bias_grad", [x], [(n.name, (x.shape[kept[0]],), x.dtype)], {"axis": kept[0]})
    else:
        keep = tuple(1 if d in dims else s for d, s in enumerate(x.shape))
        (y,) = L.b.emit(n.name, "sum_to", [x], [(n.name, keep, x.dtype)])
    return Val(y.name, y.base_shape, y.dtype, meta_shape(n))


def _activation(op):
    return lambda L, n: L.unary(n, op)


def _activation_backward(op):
    return lambda L, n: L.grad_of(n, op)


for _aten, _op in (("relu", "relu"), ("gelu", "gelu"), ("tanh", "tanh"), ("sigmoid", "sigmoid")):
    TABLE[f"aten.{_aten}.default"] = _activation(_op)
for _aten, _op in (("gelu_backward", "gelu_backward"), ("tanh_backward", "tanh_backward"),
                   ("sigmoid_backward", "sigmoid_backward")):
    TABLE[f"aten.{_aten}.default"] = _activation_backward(_op)


@handles("threshold_backward.default")
def threshold_backward(L, n):
    if n.args[2] != 0:
        raise Unsupported(f"{n.target} (threshold {n.args[2]})")
    return L.grad_of(n, "relu_backward")


def _last_axis(n, dim) -> None:
    if dim not in (-1, len(meta_shape(n)) - 1):
        raise Unsupported(f"{n.target} (over an axis other than the last)")


@handles("_softmax.default", "_safe_softmax.default")
def softmax(L, n):
    _last_axis(n, n.args[1])
    return L.unary(n, "softmax")


@handles("_softmax_backward_data.default")
def softmax_backward(L, n):
    _last_axis(n, n.args[2])
    return L.grad_of(n, "softmax_backward")


@handles("native_dropout.default")
def dropout(L, n):
    x, p, train = n.args
    if not train:
        raise Unsupported(f"{n.target} (not training)")
    X = L.dense(x)
    attrs = {"ratio": float(p), "seed": name_seed(n.name)}
    y, mask = L.multi(n, "dropout", [X], [X.shape, X.shape], ["activation", "mask"], attrs)
    # What eager torch runs on a CPU, and the profile times: the noise drawn into the
    # mask's own bytes (`empty_like(x).bernoulli_(1 - p).div_(1 - p)`), then `x * noise`.
    keep = 1.0 - float(p)
    L.replay_as[n.name] = [
        call(f"{n.name}.noise", "aten.bernoulli_.float", [ref(mask), keep]),
        call(f"{n.name}.scaled", "aten.div_.Scalar", [{"fx": f"{n.name}.noise"}, keep]),
        call(n.name, "aten.mul.Tensor", [ref(X), {"fx": f"{n.name}.scaled"}], output=y.name),
    ]
    return [y, mask]


@handles("native_dropout_backward.default")
def dropout_backward(L, n):
    scale = float(n.args[2])
    dy, noise = L.dense(n.args[0]), L.dense(n.args[1])
    dx = L.b.emit(n.name, "dropout_backward", [dy, noise], [(n.name, dy.shape, dy.dtype)],
                  {"ratio": 1.0 - 1.0 / scale})[0]
    # Eager torch's backward of `x * noise`.
    L.replay_as[n.name] = [call(n.name, "aten.mul.Tensor", [ref(dy), ref(noise)], output=dx.name)]
    return dx


# -- normalisation ---------------------------------------------------------------------


@handles("_native_batch_norm_legit_functional.default")
def batch_norm(L, n):
    x, w, b, rm, rv, training, _momentum, eps = n.args
    if not training or w is None or b is None:
        raise Unsupported(f"{n.target} (without training statistics or without weight and bias)")
    X = L.dense(x)
    c = X.shape[1]
    for buf in (rm, rv):
        L.outside.append((L.names.get(buf.name, buf.name), 4 * c))
    vals = L.multi(n, "batch_norm", [X, L.dense(w), L.dense(b)], [X.shape, (c,), (c,)],
                   ["activation", "workspace", "workspace"], {"epsilon": float(eps)})
    return vals + [None, None]


@handles("native_batch_norm_backward.default")
def batch_norm_backward(L, n):
    dy, x, w, _rm, _rv, mean, invstd, train, eps, _mask = n.args
    if not train or w is None:
        raise Unsupported(f"{n.target} (not training, or without weight)")
    X = L.dense(x)
    c = X.shape[1]
    return L.multi(n, "batch_norm_backward", [L.dense(dy), X, L.dense(w), L.dense(mean), L.dense(invstd)],
                   [X.shape, (c,), (c,)], ["gradient"] * 3, {"epsilon": float(eps)})


@handles("native_layer_norm.default")
def layer_norm(L, n):
    x, shape, w, b, eps = n.args
    if len(shape) != 1 or w is None or b is None:
        raise Unsupported(f"{n.target} (over several axes, or without weight and bias)")
    X = L.dense(x)
    rows = X.shape[:-1]
    return L.multi(n, "layer_norm", [X, L.dense(w), L.dense(b)], [X.shape, rows, rows],
                   ["activation", "workspace", "workspace"], {"epsilon": float(eps)})


@handles("native_layer_norm_backward.default")
def layer_norm_backward(L, n):
    dy, x, _shape, mean, rstd, w, _b, _mask = n.args
    X, W = L.dense(x), L.dense(w)
    rows = X.shape[:-1]
    m = L.b.shaped(L.val(mean), rows, f"{mean.name}.rows")
    r = L.b.shaped(L.val(rstd), rows, f"{rstd.name}.rows")
    return L.multi(n, "layer_norm_backward", [L.dense(dy), X, W, m, r], [X.shape, W.shape, W.shape],
                   ["gradient"] * 3)


# -- linear algebra --------------------------------------------------------------------


@handles("mm.default", "bmm.default")
def mm(L, n):
    return L.matmul(n, n.args[0], n.args[1], n.name)


@handles("addmm.default")
def addmm(L, n):
    if n.kwargs.get("beta", 1) != 1 or n.kwargs.get("alpha", 1) != 1:
        raise Unsupported(f"{n.target} (alpha or beta)")
    bias, a, b = n.args
    y = L.matmul(n, a, b, f"{n.name}.mm")
    return L.b.emit(n.name, "bias_add", [y, L.dense(bias)], [(n.name, y.shape, y.dtype)], {"axis": 1})[0]


# -- views -----------------------------------------------------------------------------


@handles("view.default", "_unsafe_view.default", "reshape.default", "unsqueeze.default", "squeeze.dim",
         "squeeze.default")
def view(L, n):
    return L.view(n, L.val(n.args[0]))


@handles("alias.default", "detach.default")
def alias(L, n):
    # The loss's log-softmax gets its tensor only at the loss: resolve the alias on use.
    if n.args[0].name in L.pending or n.args[0].name in L.aliases:
        L.aliases[n.name] = n.args[0]
        return None
    return L.view(n, L.val(n.args[0]))


@handles("clone.default")
def clone(L, n):
    v = L.val(n.args[0])
    if v.perm is None:
        return L.view(n, v)
    return L.b.dense(v, n.name)


@handles("t.default")
def t(L, n):
    if len(meta_shape(n)) < 2:
        return L.view(n, L.val(n.args[0]))
    return L.permuted(n, (1, 0))


@handles("transpose.int")
def transpose(L, n):
    rank = len(meta_shape(n))
    d0, d1 = n.args[1] % rank, n.args[2] % rank
    sigma = list(range(rank))
    sigma[d0], sigma[d1] = sigma[d1], sigma[d0]
    return L.permuted(n, sigma)


@handles("permute.default")
def permute(L, n):
    rank = len(meta_shape(n))
    return L.permuted(n, [d % rank for d in n.args[1]])


@handles("select.int")
def select(L, n):
    x, dim, index = n.args
    rank = len(L.val(x).shape)
    dim %= rank
    return L.narrowed(n, dim, index % L.val(x).shape[dim], 1)


@handles("slice.Tensor")
def slice_(L, n):
    x, dim, start, end, step = (list(n.args) + [0, None, None, 1][len(n.args) - 1 :])[:5]
    if step != 1:
        raise Unsupported(f"{n.target} (step {step})")
    X = L.val(x)
    dim %= len(X.shape)
    size = X.shape[dim]
    lo, hi = max(0, (start or 0) + (size if (start or 0) < 0 else 0)), min(size, end if end is not None else size)
    if hi < 0:
        hi += size
    if lo == 0 and hi == size:
        return L.view(n, X)
    return L.narrowed(n, dim, lo, hi - lo)


@handles("select_backward.default")
def select_backward(L, n):
    _dy, sizes, dim, index = n.args
    return L.widened(n, sizes, dim, index % sizes[dim], 1)


@handles("slice_backward.default")
def slice_backward(L, n):
    _dy, sizes, dim, start, end, step = n.args
    if step != 1:
        raise Unsupported(f"{n.target} (step {step})")
    size = sizes[dim]
    lo, hi = start % size if start < 0 else start, min(size, end)
    return L.widened(n, sizes, dim, lo, hi - lo)


# -- embedding and the loss ------------------------------------------------------------


@handles("embedding.default")
def embedding(L, n):
    table, ids = n.args[0], n.args[1]
    if len(n.args) > 4 and n.args[4]:
        raise Unsupported(f"{n.target} (sparse)")
    return L.b.emit(n.name, "embedding", [L.dense(ids), L.dense(table)], [(n.name, meta_shape(n), meta_dtype(n))])[0]


@handles("embedding_dense_backward.default")
def embedding_backward(L, n):
    dy, ids, _num, _padding_idx, scale_by_freq = n.args
    if scale_by_freq:
        raise Unsupported(f"{n.target} (scale_grad_by_freq)")
    return L.b.emit(n.name, "embedding_backward", [L.dense(dy), L.dense(ids)],
                    [(n.name, meta_shape(n), meta_dtype(n))])[0]


@handles("_log_softmax.default")
def log_softmax(L, n):
    x, dim = n.args[0], n.args[1]
    if len(meta_shape(n)) != 2 or dim not in (1, -1):
        raise Unsupported(f"{n.target} (outside a cross-entropy loss over [N, C] logits)")
    L.pending[n.name] = x
    return None


@handles("nll_loss_forward.default")
def nll_loss(L, n):
    logp, target, weight, reduction, _ignore = n.args
    x = L.pending.get(logp.name)
    if x is None or weight is not None or reduction != 1:
        raise Unsupported(f"{n.target} (other than the mean cross-entropy of a log_softmax, without weights)")
    X = L.dense(x)
    loss, probs = L.b.emit(n.name, "softmax_cross_entropy", [X, L.dense(target)],
                           [(L.out_name(n, 0), (), X.dtype), (logp.name, X.shape, X.dtype, "workspace")])
    L.vals[logp.name] = probs
    # torch runs the log-softmax as its own op, before the loss: its result is placer's
    # probabilities, written by the loss node.
    L.kernel(logp, str(logp.target), probs, [n.name])
    return [loss, None]


@handles("ones_like.default")
def ones_like(L, n):
    if not any(str(u.target) == "aten.nll_loss_backward.default" for u in n.users):
        raise Unsupported(f"{n.target} (other than the seed of the loss's gradient)")
    return SEED


@handles("nll_loss_backward.default")
def nll_loss_backward(L, n):
    seed, logp, target = n.args[0], n.args[1], n.args[2]
    if L.vals.get(seed.name) is not SEED:
        raise Unsupported(f"{n.target} (of a loss that is not the step's output)")
    L.pending[n.name] = (L.val(logp), L.dense(target))
    return None


@handles("_log_softmax_backward_data.default")
def log_softmax_backward(L, n):
    pending = L.pending.get(n.args[0].name)
    if not isinstance(pending, tuple):
        raise Unsupported(f"{n.target} (outside a cross-entropy loss)")
    probs, labels = pending
    return L.b.emit(n.name, "softmax_cross_entropy_backward", [probs, labels],
                    [(n.name, probs.shape, probs.dtype)])[0]
