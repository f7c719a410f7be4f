"""What the benchmarks under ``benchmarks/`` share: one timed call, one training step built the same way for every
model they time (so that two benchmarks timing "a train step" time the same thing), the fp32 matmul ceiling their
FLOP bounds divide by, and two counts that need no clock: the FLOPs a call does and the activation bytes a forward
keeps for its backward."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
import torch.utils.flop_counter as fc


def timed(fn: Callable[[], object]) -> float:
    """Wall seconds of one call."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def timed_cpu(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of one call."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def matmul_probe(m: int, k: int, n: int, repeats: int = 3) -> Callable[[], float]:
    """A probe of the fp32 matmul peak at one shape: each call runs one untimed (m x k) @ (k x n) product, then
    ``repeats`` timed ones, and returns the best in GFLOP/s. A benchmark calls it in every round beside the steps it
    times, so that a shared machine's load weighs on the ceiling as on the steps."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    flops = 2 * m * k * n

    def probe() -> float:
        a @ b
        return max(flops / timed(lambda: a @ b) for _ in range(repeats)) / 1e9

    return probe


def train_step(
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    labels: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    *,
    amp: bool = False,
    clip: float | None = None,
) -> Callable[[], None]:
    """A closure doing one classifier training step: forward (bf16 autocast on CPU when ``amp``), cross-entropy in
    fp32 over every position the logits have (``(B, C)`` or per element ``(B, N, C)``), backward, optional gradient
    clipping at ``clip``, optimizer step."""

    def step() -> None:
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = model(*inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()

    return step


# ---- FLOPs: torch's counter, with the formulas it lacks (it is given shapes, not tensors) ---------------------


def _inplace_addmm(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return fc.addmm_flop(self_shape, a_shape, b_shape)


def _inplace_baddbmm(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs) -> int:
    return fc.baddbmm_flop(self_shape, a_shape, b_shape)


def _cpu_flash(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return fc.sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_flash_backward(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return fc.sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def _rnn_forward_flops(input_shape, w_ih_shape, w_hh_shape) -> int:
    """One LSTM layer, one direction: every row (time step x sequence) does x W_ih^T and h W_hh^T, 2 FLOPs a MAC."""
    rows = math.prod(input_shape[:-1])
    return 2 * rows * (w_ih_shape[0] * w_ih_shape[1] + w_hh_shape[0] * w_hh_shape[1])


def _mkldnn_rnn(input_shape, w_ih_shape, w_hh_shape, *args, out_shape=None, **kwargs) -> int:
    return _rnn_forward_flops(input_shape, w_ih_shape, w_hh_shape)


def _mkldnn_rnn_backward(input_shape, w_ih_shape, w_hh_shape, *args, out_shape=None, **kwargs) -> int:
    return 2 * _rnn_forward_flops(input_shape, w_ih_shape, w_hh_shape)  # grads of the inputs and of the weights


_aten = torch.ops.aten
# in-place addmm_ / baddbmm_ (the fused SWARM recurrence), SDPA's CPU flash kernels, oneDNN's LSTM layer
EXTRA_FLOPS = {
    _aten.addmm_: _inplace_addmm,
    _aten.baddbmm_: _inplace_baddbmm,
    _aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_flash_backward,
    _aten.mkldnn_rnn_layer: _mkldnn_rnn,
    _aten.mkldnn_rnn_layer_backward: _mkldnn_rnn_backward,
}


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs of one call of ``fn`` (matmuls, convolutions and attention, 2 per multiply-add; elementwise work is not
    counted): ``torch.utils.flop_counter.FlopCounterMode`` with :data:`EXTRA_FLOPS`, so the ops that actually run on
    the CPU are counted."""
    with fc.FlopCounterMode(display=False, custom_mapping=EXTRA_FLOPS) as counter:
        fn()
    return counter.get_total_flops()


def saved_activation_bytes(fn: Callable[[], object], exclude: Iterable[torch.Tensor] = ()) -> int:
    """Bytes of the tensors autograd keeps from one call of ``fn`` (a forward) for its backward: the activation
    memory of a training step, counted once per storage (views of one buffer share it), without the storages of
    ``exclude`` (pass the model's parameters: a matmul saves its weight, which is no activation). A count, not a
    reading of the allocator, so it is the same on a busy machine as on an idle one."""
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    kept: dict[int, torch.UntypedStorage] = {}  # held to the end, so that no freed address is counted twice

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip:
            kept[storage.data_ptr()] = storage
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(s.nbytes() for s in kept.values())
