"""``train.compile: graph``: the whole train step (forward, loss, backward, clipping, the optimizer) captured in one
CUDA graph and replayed once a step, the model inside compiled by inductor (``torch.compile``, default mode).

On a GPU a compiled step is still bound by the host: ``reduce-overhead`` graphs the model's forward and backward, but
the loss, clipping and AdamW launch about 26 kernels a step from Python (SwarmFormer-Small on an H200: 15,900
samples/s at batch 48, the GPU busy half the step). One replay a step removes them (31,000 samples/s in
``benchmarks/engine_throughput.py --graph-compile default``; ``reports/side/engine_gpu/profile_seeds/``).

How: the first ``WARMUP`` steps of a batch shape run eagerly on a side stream (compilation, the allocator, the
optimizer's state), the next one is captured and replayed; each later batch of that shape is copied into the graph's
static inputs before its replay. The optimizer runs fused and capturable with its learning rate held in a device
tensor, which a schedule fills in place. A batch of another shape (an epoch's short last batch) takes the eager
path. The graph holds the optimizer's state tensors: when a callback replaces them (backtracking loads the best
state), ``check`` drops the graph and the next steps warm up and capture again.

Needs CUDA, and a task whose step makes no host sync (no ``.item()`` or data-dependent shapes in its forward or
loss): a step that cannot be captured is one error naming ``reduce-overhead`` as the mode to use instead.
"""

from __future__ import annotations

from typing import Callable

import torch

from swarmlab.errors import SwarmlabError

WARMUP = 3  # eager steps of a batch shape before its capture (the PyTorch CUDA graphs notes warm up with three)


def tensor_lr(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Make every param group capturable with its learning rate in a device tensor (what a captured fused AdamW
    reads at each replay)."""
    for group in optimizer.param_groups:
        group["capturable"] = True
        group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)


def plain_lr(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """The other way, for a run that resumes a graph run's checkpoint without graphs: float learning rates, and
    ``capturable`` off where the device cannot capture."""
    for group in optimizer.param_groups:
        if torch.is_tensor(group["lr"]):
            group["lr"] = float(group["lr"])
        if device.type != "cuda":
            group["capturable"] = False


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Every group's learning rate to ``lr``: in place where it is a tensor (a captured graph keeps reading it)."""
    for group in optimizer.param_groups:
        if torch.is_tensor(group["lr"]):
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr


def _state_ids(optimizer: torch.optim.Optimizer) -> tuple:
    """The identity of the tensors a captured step reads: the learning rates and the optimizer's state."""
    return tuple(id(g["lr"]) for g in optimizer.param_groups) + tuple(
        id(t) for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t)
    )


def _shape(batch: dict) -> tuple:
    return tuple((k, tuple(v.shape), v.dtype) for k, v in batch.items() if torch.is_tensor(v))


class GraphStep:
    """The captured train step of one ``fit``. ``step(batch)`` returns ``(out, loss)``, as the eager step does;
    ``compute(batch, cache)`` is that step run eagerly (forward and loss under autocast, backward, clipping, the
    optimizer), which the warm-up and the capture call. Every call passes ``cache=False``, the autocast cache the
    capture needs off: Dynamo guards on it, so a warm-up with it on would make the capture recompile the model, and
    compiling inside a capture invalidates it (seen on an H200: cudaErrorStreamCaptureInvalidated)."""

    def __init__(self, compute: Callable, optimizer: torch.optim.Optimizer, device: torch.device):
        if device.type != "cuda":
            raise SwarmlabError(
                f"train.compile graph captures the train step in a CUDA graph, and the device is {device.type}: "
                "use eager (or default) on a CPU"
            )
        self.compute, self.optimizer, self.device = compute, optimizer, device
        self.graph, self.shape, self.warm, self.ids = None, None, 0, None
        self.static: dict = {}
        self.out = self.loss = None
        self.replays = self.eager_steps = 0

    def step(self, batch: dict):
        """One train step on ``batch`` (already on the device): a replay when the graph holds its shape."""
        shape = _shape(batch)
        if self.graph is not None and shape == self.shape:
            self._load(batch)
            self.graph.replay()
            self.replays += 1
            return self.out, self.loss
        if self.shape is None or (self.graph is None and shape != self.shape):
            self.shape, self.warm = shape, 0  # the first batch shape seen (the full one) is the one to capture
        if shape != self.shape:  # another shape than the graph's: eager, on the default stream
            self.eager_steps += 1
            self.optimizer.zero_grad(set_to_none=True)
            return self.compute(batch, False)
        if self.warm < WARMUP:
            self.warm += 1
            self.eager_steps += 1
            return self._warm_step(batch)
        return self._capture(batch)

    def _load(self, batch: dict) -> None:
        for k, v in self.static.items():
            v.copy_(batch[k], non_blocking=True)

    def _warm_step(self, batch: dict):
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.optimizer.zero_grad(set_to_none=True)
            out, loss = self.compute(batch, False)
        torch.cuda.current_stream(self.device).wait_stream(side)
        return out, loss

    def _capture(self, batch: dict):
        self.static = {k: v.clone() for k, v in batch.items() if torch.is_tensor(v)}
        static_batch = {**batch, **self.static}
        self.optimizer.zero_grad(set_to_none=True)  # the gradients are allocated inside the graph's pool
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.out, self.loss = self.compute(static_batch, False)
        except RuntimeError as exc:
            raise SwarmlabError(
                f"train.compile graph could not capture this task's train step in a CUDA graph ({exc}); "
                "a step that reads a value on the host cannot be captured: use reduce-overhead"
            ) from None
        self.graph, self.ids = graph, _state_ids(self.optimizer)
        graph.replay()  # capturing records the step without running it
        self.replays += 1
        return self.out, self.loss

    def counts(self) -> dict:
        """How the steps ran: replays of the graph, and eager steps (warm-ups and other batch shapes)."""
        return {"graph_replays": self.replays, "graph_eager_steps": self.eager_steps}

    def check(self) -> None:
        """Before the first step and after the callbacks: the learning rates in device tensors and the groups
        capturable; when the callbacks replaced the optimizer's state or learning rates (backtracking loads the
        best ones), the graph is dropped and the next steps warm up and capture again."""
        stale = self.graph is not None and _state_ids(self.optimizer) != self.ids
        if any(not torch.is_tensor(g["lr"]) or not g.get("capturable") for g in self.optimizer.param_groups):
            tensor_lr(self.optimizer, self.device)
            stale = self.graph is not None
        if stale:
            self.graph, self.static, self.out, self.loss, self.warm = None, {}, None, None, 0
