"""params.yaml restates every section's defaults (so that DVC tracks them as params, and a reader sees them): each
value of `defaults.<section>` must be the default its dataclass declares, field for field, so that the two cannot
drift apart (issue 36: TrainConfig's defaults were restated with nothing keeping them equal)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from swarmlab.engine import TrainConfig
from swarmlab.drive.sections import SECTIONS
from tests.conftest import REPO_ROOT

DEFAULTS = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())["defaults"]
# fields set in params.yaml on purpose: the engine's run-level fields come from elsewhere (seed, evaluate.batch_size)
NOT_RESTATED = {"train": {"seed", "eval_batch_size"}}
DATA = {"sweep": {"spaces"}}  # not a default but the project's data (the search spaces)


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING


@pytest.mark.parametrize("section", ["train", *sorted(SECTIONS)])
def test_params_defaults_are_the_dataclass_defaults(section):
    cls = TrainConfig if section == "train" else SECTIONS[section]
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in NOT_RESTATED.get(section, set())}
    written = DEFAULTS[section]
    assert set(written) == set(fields), (
        f"defaults.{section}: {sorted(set(written) ^ set(fields))} differ from {cls.__name__}"
    )
    differ = {
        k: (written[k], _default(f))
        for k, f in fields.items()
        if k not in DATA.get(section, set()) and written[k] != _default(f)
    }
    assert not differ, f"defaults.{section} (params.yaml) against {cls.__name__}'s defaults: {differ}"


def test_the_check_sees_a_drift(monkeypatch):
    monkeypatch.setitem(DEFAULTS, "train", {**DEFAULTS["train"], "lr": 1.0})
    with pytest.raises(AssertionError, match="lr"):
        test_params_defaults_are_the_dataclass_defaults("train")
