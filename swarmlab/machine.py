"""The machine a measurement ran on, and the CPU time it took.

What every benchmark prints first: the CPU it ran on (timings differ between this project's AVX2-only and AVX-512
machines by up to 10x for bf16), torch's build and thread count. ``cpu_seconds`` is the CPU time a stage reports
beside its wall time (on a shared machine the two differ).
"""

from __future__ import annotations

import platform
import resource
from pathlib import Path


def cpu_flags() -> tuple[str, set[str]]:
    """The CPU's model name and its feature flags, from /proc/cpuinfo (Linux); (platform name, set()) elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return platform.processor() or "unknown CPU", set()
    name = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "unknown CPU")
    flags = next((set(ln.split(":", 1)[1].split()) for ln in text.splitlines() if ln.startswith("flags")), set())
    return name, flags


def describe_cpu() -> str:
    """``<model name> (<vector extensions>)``, e.g. ``AMD EPYC (avx2)`` or ``Intel Xeon (avx2 avx512f avx512_bf16)``."""
    name, flags = cpu_flags()
    vec = sorted(f for f in flags if f == "avx2" or f.startswith(("avx512", "amx")))
    return f"{name} ({' '.join(vec) or 'no AVX2/AVX-512'})"


def describe_machine() -> str:
    """The CPU, torch's version, its CPU capability and its intra-op thread count."""
    import torch  # torch: heavy; a stage that never builds a model describes the CPU without it

    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except AttributeError:
        capability = "?"
    return (
        f"CPU: {describe_cpu()}; torch {torch.__version__} (capability {capability}), "
        f"{torch.get_num_threads()} thread(s)"
    )


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its children that have been waited for (a joined pool's
    workers): compare with the wall time, a busy machine shows as wall >> CPU / workers."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
