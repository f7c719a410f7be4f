"""One declaration per setting: its rules and its roles sit on the dataclass field, and the lists other readers
keep (what a resumed run may change, what the report states as a budget, what a sweep records) derive from it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from swarmlab.engine import RESUMABLE_CHANGES, TrainConfig
from swarmlab.drive.sections import SweepConfig
from swarmlab.settings import SettingsError, fields_with, parse, setting
from swarmlab.drive.sweep.tune import SETTINGS


def rules(cls, name: str) -> dict:
    return {f.name: f for f in dataclasses.fields(cls)}[name].metadata["rules"]


def test_roles_are_read_from_the_declaration_in_its_order():
    @dataclass
    class Toy:
        a: int = setting(1, ge=0, roles=("budget",))
        b: int = setting(2)
        c: str = setting("x", choices=("x", "y"), roles=("resumable", "budget"))

    assert fields_with(Toy, "budget") == ("a", "c") and fields_with(Toy, "resumable") == ("c",)
    assert fields_with(Toy, "other") == ()
    with pytest.raises(SettingsError, match="c must be one of x, y"):
        parse(Toy, {"c": "z"}, "toy")


def test_a_resumed_run_may_change_only_when_it_stops_and_where_it_runs():
    assert RESUMABLE_CHANGES == set(fields_with(TrainConfig, "resumable"))
    assert {"max_epochs", "max_steps", "time_budget_s", "patience", "device", "num_threads"} <= RESUMABLE_CHANGES
    # what a run computes is never resumable: a changed learning rate, batch, seed or optimizer is a new run
    assert not RESUMABLE_CHANGES & {"lr", "batch_size", "seed", "optimizer", "weight_decay", "plateau", "amp"}


def test_the_report_states_the_budget_that_trainconfig_declares():
    budget = fields_with(TrainConfig, "budget")
    assert {"max_epochs", "max_steps", "time_budget_s", "patience", "batch_size", "lr"} <= set(budget)
    assert all(name in {f.name for f in dataclasses.fields(TrainConfig)} for name in budget)


def test_the_sweep_records_every_setting_of_its_section_and_shares_the_engine_rules():
    names = {f.name for f in dataclasses.fields(SweepConfig)}
    assert set(SETTINGS) == names - {"models", "address", "spaces"}
    for shared in ("max_epochs", "max_steps", "time_budget_s"):  # per-trial overrides of the engine's settings
        assert rules(SweepConfig, shared) == rules(TrainConfig, shared), shared
