"""Issue 36 item 4, one candidate measured: pydantic against swarmlab.settings on the refusals a params file meets.

The same section (``EvaluateConfig``-like: a bounded int, a bounded float, a choice, a bool) declared both ways; each
bad input goes through both; printed: each one's message (first line), whether it names the key, the value and what
is allowed, and the time per parse of a good section.

    python scripts/settings_candidates.py
"""

from __future__ import annotations

import dataclasses
import math
import timeit
from typing import Annotated, Literal

import pydantic

from swarmlab.settings import SettingsError, parse, setting


@dataclasses.dataclass
class Ours:
    batch_size: int = setting(256, ge=1)
    lr: float = setting(1e-3, gt=0.0, lt=1.0)
    amp: str = setting("fp32", choices=("fp32", "bf16", "auto"))
    compile_model: bool = setting(False)


class Theirs(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    batch_size: Annotated[int, pydantic.Field(ge=1)] = 256
    lr: Annotated[float, pydantic.Field(gt=0.0, lt=1.0)] = 1e-3
    amp: Literal["fp32", "bf16", "auto"] = "fp32"
    compile_model: bool = False


CASES = {
    "unknown key (a typo)": {"batch_sise": 64},
    "wrong type": {"batch_size": "64"},
    "out of range": {"batch_size": 0},
    "not a choice": {"amp": "fp16"},
    "non-finite": {"lr": math.nan},
    "int for a float (allowed)": {"lr": 1},
    "bool for an int": {"batch_size": True},
}


def ours(values: dict) -> str:
    try:
        parse(Ours, values, "evaluate")
        return "accepted"
    except SettingsError as exc:
        return str(exc).splitlines()[0]


def theirs(values: dict) -> str:
    try:
        Theirs(**values)
        return "accepted"
    except pydantic.ValidationError as exc:
        return " | ".join(str(exc).splitlines()[:3])


def main() -> None:
    print(f"pydantic {pydantic.VERSION}\n")
    for name, values in CASES.items():
        print(f"{name}: {values}\n  ours:     {ours(values)}\n  pydantic: {theirs(values)}\n")
    good = {"batch_size": 64, "lr": 3e-4, "amp": "bf16"}
    n = 20000
    t_ours = timeit.timeit(lambda: parse(Ours, good, "evaluate"), number=n) / n * 1e6
    t_theirs = timeit.timeit(lambda: Theirs(**good), number=n) / n * 1e6
    print(f"parse of a good section: ours {t_ours:.1f} us, pydantic {t_theirs:.1f} us")


if __name__ == "__main__":
    main()
