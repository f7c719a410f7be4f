"""SWARM's fused recurrence (models/swarm.py ``fast=True``): all ``n_iter`` iterations of the cell with a
hand-written forward and backward. It computes what the plain equations in models/swarm.py compute (the tests
compare the two, outputs and gradients), with less memory traffic:

On a CPU about half of a SWARM train step is elementwise work bound by memory traffic, and the autograd graph of
the plain loop allocates (and page-faults in) a dozen fresh (B, N, H)-sized tensors per iteration. The fused path
does one (B*N, H) x (H, 4H) matmul per iteration straight into a preallocated gate buffer, adds the pooled term as a
(B, 4H) broadcast (causal: one more (B*N, H) x (H, 4H) matmul, as the pool differs per position), activates the
gates in place with ONE sigmoid pass (tanh(x) = 2 sigmoid(2x) - 1: torch's CPU tanh costs ~3.5x its sigmoid),
saves only the activated gates and c per iteration (h and tanh(c) are recomputed in the backward), and runs the
backward with fused ``sigmoid_backward`` / ``tanh_backward`` kernels into reused buffers. Under autocast the
recurrence runs in fp32. Whole sets go through all iterations in blocks of about ``block_rows`` rows of (B*N)
(issue 19): pooling never crosses sets, so a block is the same computation on fewer rows, and its (rows, 4H) gates
stay in cache across the ~20 elementwise passes of an iteration instead of streaming from memory for each
(benchmarks/set_step_bound.py: 1.05-1.25x per train step at N=100, 1.2-1.45x at N=550, one thread; with two threads
the ~10x more ops measured 0.4-0.6x, so the blocks are used with one thread only).
"""

from __future__ import annotations

import torch


def mean_weights(mask: torch.Tensor | None, B: int, N: int, like: torch.Tensor) -> torch.Tensor:
    """(B, 1, N) weights w with P(h) = w @ h: 1/count on real entities, 0 on padding (all 0 if none)."""
    if mask is None:
        return like.new_full((B, 1, N), 1.0 / N)
    m = mask.to(like.dtype)  # (B, N)
    return (m / m.sum(dim=1, keepdim=True).clamp(min=1.0)).unsqueeze(1)  # (B, 1, N)


# On the CPUs this was tuned on, torch's tanh kernel costs ~3.5x its sigmoid kernel per element, so the fast
# path computes tanh(x) = 2 sigmoid(2x) - 1 (absolute error ~1e-7 in fp32) with cheap passes around one sigmoid.
_MINUS_ONE = torch.tensor(-1.0)


def _tanh(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    """``out = tanh(x)`` as 2 sigmoid(2x) - 1; ``out`` may be ``x``."""
    torch.mul(x, 2.0, out=out).sigmoid_()
    return torch.add(_MINUS_ONE.to(out.dtype), out, alpha=2.0, out=out)  # -1 + 2 s, one pass


def _activate_gates(z: torch.Tensor, H: int) -> None:
    """In place on (M, 4H) rows [i f o g]: sigmoid on i, f, o and tanh on g, as ONE contiguous sigmoid pass
    over all 4H columns with g pre-doubled (tanh(x) = 2 sigmoid(2x) - 1)."""
    g = z[:, 3 * H :]
    g.mul_(2.0)
    z.sigmoid_()
    torch.add(_MINUS_ONE.to(z.dtype), g, alpha=2.0, out=g)


def fused_forward(xw, w_hh, w_hp, pool_info, drop, pooling: str, n_iter: int, *, save: bool, out=None):
    """Forward of :class:`SwarmRecurrence` on one block of whole sets; with ``save`` it keeps every iteration's
    gates and c for the backward. ``out``: a contiguous (B, N, 2H) buffer for [h; c], or None (allocated)."""
    B, N, G = xw.shape
    H = G // 4
    # one gate buffer per iteration when a backward will follow, else a single reused one
    gates = xw.new_empty((n_iter if save else 1, B * N, G))  # (T, B*N, 4H) activated i, f, o, g
    cells = xw.new_empty((n_iter if save else 2, B * N, H))  # (T, B*N, H) c after each iteration
    hc = xw.new_empty((B, N, 2 * H)) if out is None else out  # output [h; c]
    h = hc[..., :H].view(B * N, H)  # (B*N, H) strided view: rows of 2H, first half
    tc = xw.new_empty((B * N, H))
    xw2 = xw.reshape(B * N, G)
    pooled, argmax = [], []  # per iteration t < n_iter - 1: P(h_t) (B, H), max indices (B, H)
    for t in range(n_iter):
        z = gates[t if save else 0]  # (B*N, 4H)
        c = cells[t if save else t % 2]
        if t == 0:  # h = c = 0: only the input term
            z.copy_(xw2)
        else:
            if pooling == "causal":
                p = torch.cumsum(h.view(B, N, H), dim=1).mul_(pool_info)  # (B, N, H)
                torch.addmm(xw2, p.view(B * N, H), w_hp.t(), out=z)  # (B*N, 4H)
            else:
                if pooling == "mean":
                    p = torch.bmm(pool_info, h.view(B, N, H)).squeeze(1)  # (B, 1, N) @ (B, N, H) -> (B, H)
                else:
                    p, idx = _masked_max(h.view(B, N, H), pool_info)  # (B, H), (B, H)
                    argmax.append(idx)
                pooled.append(p)
                torch.add(xw.view(B, N, G), (p @ w_hp.t()).unsqueeze(1), out=z.view(B, N, G))  # + (B, 1, 4H)
            z.addmm_(h, w_hh.t())  # += h W_hh^T: the one (B*N, H) x (H, 4H) matmul of the iteration
        _activate_gates(z, H)  # i, f, o = sigmoid, g = tanh, in place
        i, f, o, g = z.split(H, dim=1)
        if t == 0:
            torch.mul(i, g, out=c)
        else:
            torch.mul(f, cells[t - 1 if save else (t - 1) % 2], out=c).addcmul_(i, g)
        _tanh(c, out=tc)
        torch.mul(o, tc, out=h)
        if drop is not None:
            h.view(B, N, H).mul_(drop[t])
    hc[..., H:].copy_(c.view(B, N, H))
    return hc, gates, cells, pooled, argmax


def effective_block_rows(block_rows: int, threads: int) -> int:
    """The blocks are used with ONE intra-op thread only; with more, all sets at once (0).

    Each op on a block is a barrier for all threads, and blocks make ~10x more (smaller) ops: on the shared
    2-core machine, 2 threads ran the blocked train step at 0.36-0.63x the unblocked one (three runs of
    benchmarks/set_step_bound.py), while 1 thread gained 1.05-1.45x. The `cpu` profile trains set models with
    one thread. Re-measure before widening this on a dedicated multi-core machine.
    """
    return block_rows if threads == 1 else 0


def set_blocks(B: int, N: int, block_rows: int) -> list[tuple[int, int]]:
    """Sets [b0, b1) per block: as many whole sets as fit in ``block_rows`` rows of (B*N) (at least one);
    ``block_rows=0``: one block of all B sets."""
    per = B if block_rows <= 0 else max(1, block_rows // max(N, 1))
    return [(b0, min(B, b0 + per)) for b0 in range(0, B, per)]


def block_info(pool_info, drop, pooling: str, b0: int, b1: int):
    """``pool_info`` and ``drop`` of the sets [b0, b1) (causal pool_info is per position: shared)."""
    if pool_info is not None and pooling != "causal":
        pool_info = pool_info[b0:b1]  # (b, 1, N) mean weights or (b, N) mask
    return pool_info, (drop[:, b0:b1] if drop is not None else None)  # (T, b, 1, H)


class SwarmRecurrence(torch.autograd.Function):
    """All ``n_iter`` iterations of the SWARM cell with a hand-written backward (see the module docstring).

    Inputs: ``xw`` (B, N, 4H) = W_ih x + b; ``w_hh``, ``w_hp`` (4H, H); ``pool_info``: the (B, 1, N) mean
    weights (mean), the (B, N) bool mask or None (max), or the (N, 1) reciprocal positions (causal);
    ``drop`` (n_iter, B, 1, H) keep masks or None; ``block_rows``: sets are run through all iterations in
    blocks of whole sets of about this many rows (0 = all at once). Output: [h; c] after the last
    iteration, (B, N, 2H).
    """

    @staticmethod
    def forward(ctx, xw, w_hh, w_hp, pool_info, drop, pooling: str, n_iter: int, block_rows: int):
        B, N, _ = xw.shape
        H = w_hh.shape[1]
        blocks = set_blocks(B, N, block_rows)
        hc = xw.new_empty((B, N, 2 * H))  # (B, N, 2H)
        saved, counts = [], []
        for b0, b1 in blocks:  # the sets of a block never meet those of another: pooling is per set
            info, dr = block_info(pool_info, drop, pooling, b0, b1)
            _, gates, cells, pooled, argmax = fused_forward(
                xw[b0:b1], w_hh, w_hp, info, dr, pooling, n_iter, save=True, out=hc[b0:b1]
            )
            saved += [gates, cells, *pooled, *argmax]
            counts.append((len(pooled), len(argmax)))  # how many of each this block saved
        ctx.save_for_backward(w_hh, w_hp, pool_info, drop, *saved)
        ctx.meta = (pooling, n_iter, blocks, counts)
        return hc

    @staticmethod
    def backward(ctx, d_hc):
        pooling, n_iter, blocks, counts = ctx.meta
        w_hh, w_hp, pool_info, drop, *saved = ctx.saved_tensors
        dxw = d_hc.new_empty(d_hc.shape[:2] + (2 * d_hc.shape[2],))  # (B, N, 4H)
        dw_hh, dw_hp = torch.zeros_like(w_hh), torch.zeros_like(w_hp)  # (4H, H), summed over the blocks
        k = 0
        for (b0, b1), (n_pooled, n_argmax) in zip(blocks, counts):
            gates, cells, *rest = saved[k : k + 2 + n_pooled + n_argmax]
            pooled, argmax = rest[:n_pooled], rest[n_pooled:]
            k += 2 + n_pooled + n_argmax
            info, dr = block_info(pool_info, drop, pooling, b0, b1)
            fused_backward(
                d_hc[b0:b1],
                gates,
                cells,
                w_hh,
                w_hp,
                info,
                dr,
                pooled,
                argmax,
                pooling,
                n_iter,
                dxw=dxw[b0:b1],
                dw_hh=dw_hh,
                dw_hp=dw_hp,
            )
        return dxw, dw_hh, dw_hp, None, None, None, None, None


def fused_backward(
    d_hc, gates, cells, w_hh, w_hp, pool_info, drop, pooled, argmax, pooling: str, n_iter: int, *, dxw, dw_hh, dw_hp
) -> None:
    """Backward of one block of whole sets: writes d xw into ``dxw`` (a contiguous (b, N, 4H) view) and adds
    the block's weight gradients to ``dw_hh`` and ``dw_hp`` (4H, H) in place."""
    B, N, H2 = d_hc.shape
    H = H2 // 2
    G = 4 * H
    dh = d_hc[..., :H].reshape(B * N, H).clone()  # grad w.r.t. h after the last iteration
    dc = d_hc[..., H:].reshape(B * N, H).clone()  # grad w.r.t. c
    dz = gates.new_empty((B * N, G))
    dz_i, dz_f, dz_o, dz_g = dz.split(H, dim=1)
    dxw = dxw.view(B * N, G).zero_()  # (B*N, 4H)
    tc, tc_prev, tmp = (gates.new_empty((B * N, H)) for _ in range(3))
    dh_prev, h_prev = gates.new_empty((B * N, H)), gates.new_empty((B * N, H))
    _tanh(cells[n_iter - 1], out=tc)
    sig_bw = torch.ops.aten.sigmoid_backward.grad_input  # (grad, y, *, grad_input): grad * y * (1 - y)
    tanh_bw = torch.ops.aten.tanh_backward.grad_input  # (grad, y, *, grad_input): grad * (1 - y^2)
    for t in range(n_iter - 1, -1, -1):
        i, f, o, g = gates[t].split(H, dim=1)
        if drop is not None:
            dh.view(B, N, H).mul_(drop[t])  # grad w.r.t. h before dropout
        torch.mul(dh, tc, out=dz_o)
        sig_bw(dz_o, o, grad_input=dz_o)  # dz_o = dh * tanh(c) * o (1 - o)
        torch.mul(dh, o, out=tmp)
        dc.add_(tanh_bw(tmp, tc, grad_input=tmp))  # dc += dh * o * (1 - tanh(c)^2)
        torch.mul(dc, g, out=dz_i)
        sig_bw(dz_i, i, grad_input=dz_i)  # dz_i = dc * g * i (1 - i)
        torch.mul(dc, i, out=dz_g)
        tanh_bw(dz_g, g, grad_input=dz_g)  # dz_g = dc * i * (1 - g^2)
        if t == 0:
            dz_f.zero_()  # c before the first iteration is 0
            dxw.add_(dz)
            break
        torch.mul(dc, cells[t - 1], out=dz_f)
        sig_bw(dz_f, f, grad_input=dz_f)  # dz_f = dc * c_prev * f (1 - f)
        dc.mul_(f)  # grad w.r.t. c_prev
        dxw.add_(dz)
        # h_prev = o_prev * tanh(c_prev) (* dropout), recomputed; tanh(c_prev) is the next step's tc
        _tanh(cells[t - 1], out=tc_prev)
        torch.mul(gates[t - 1][:, 2 * H : 3 * H], tc_prev, out=h_prev)
        if drop is not None:
            h_prev.view(B, N, H).mul_(drop[t - 1])
        dw_hh.addmm_(dz.t(), h_prev)  # (4H, B*N) @ (B*N, H)
        torch.mm(dz, w_hh, out=dh_prev)  # (B*N, 4H) @ (4H, H): grad w.r.t. h_prev through W_hh
        if pooling == "causal":
            p = torch.cumsum(h_prev.view(B, N, H), dim=1).mul_(pool_info)  # (B, N, H)
            dw_hp.addmm_(dz.t(), p.view(B * N, H))
            dp = torch.mm(dz, w_hp).view(B, N, H).mul_(pool_info)  # dp_i = dL/d(sum_{j<=i} h_j) = W_hp^T dz_i / i
            # h_j enters every sum with i >= j: dh_j += sum_{i >= j} dp_i
            dh_prev.view(B, N, H).add_(torch.cumsum(dp.flip(1), dim=1).flip(1))  # reverse cumsum (B, N, H)
        else:
            dpt = dz.view(B, N, G).sum(dim=1)  # (B, 4H): the pooled term is shared by all N entities
            dw_hp.addmm_(dpt.t(), pooled[t - 1])
            dp = dpt @ w_hp  # (B, H)
            if pooling == "mean":
                dh_prev.view(B, N, H).baddbmm_(pool_info.transpose(1, 2), dp.unsqueeze(1))  # w_j * dp
            else:
                if pool_info is not None:  # an empty set pooled to the constant 0
                    dp = dp * pool_info.any(dim=1, keepdim=True)
                dh_prev.view(B, N, H).scatter_add_(1, argmax[t - 1].unsqueeze(1), dp.unsqueeze(1))
        dh, dh_prev = dh_prev, dh
        tc, tc_prev = tc_prev, tc


def _masked_max(h: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Max of ``h`` (B, N, H) over the real entities and its indices (B, H); a set with none gives 0."""
    if mask is None:
        return h.max(dim=1)
    p, idx = h.masked_fill(~mask[..., None], float("-inf")).max(dim=1)  # (B, H)
    return p.masked_fill_(~mask.any(dim=1, keepdim=True), 0.0), idx
