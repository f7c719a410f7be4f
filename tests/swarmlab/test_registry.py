"""One way to register (issue 36): models and tasks find their modules by themselves and refuse an unknown name with
the same error, and a new module registers itself with no import list to edit."""

from __future__ import annotations

import sys

import pytest

import models
import tasks
from swarmlab.errors import SwarmlabError
from swarmlab.registry import UnknownNameError


def test_models_and_tasks_refuse_an_unknown_name_the_same_way():
    for lookup, name, near in (
        (models.create_model, "swarmformer_smal", "swarmformer_small"),
        (tasks.task_class, "imbd", "imdb"),
    ):
        with pytest.raises(UnknownNameError) as info:
            lookup(name)
        assert isinstance(info.value, SwarmlabError) and isinstance(info.value, KeyError)  # a stage's one line
        assert str(info.value).startswith("unknown ") and f"did you mean {near}" in str(info.value)


def test_every_module_registers_itself_on_the_first_lookup(tmp_path, monkeypatch):
    """A package with a registry and two modules that register, and none that imports them: both are found."""
    pkg = tmp_path / "toypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "reg.py").write_text("from swarmlab.registry import Registry\nREG = Registry('widget', 'toypkg')\n")
    for name in ("alpha", "beta"):
        (pkg / f"{name}.py").write_text(f"from toypkg.reg import REG\nREG.add({name!r}, {name!r}.upper())\n")
    (pkg / "_private.py").write_text("raise RuntimeError('a module starting with _ is not loaded')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        from toypkg.reg import REG

        assert REG.names() == ["alpha", "beta"] and REG.get("beta") == "BETA"
        with pytest.raises(UnknownNameError, match="unknown widget 'gama'; known: alpha, beta"):
            REG.get("gama")
        with pytest.raises(ValueError, match="widget 'alpha' is registered twice"):
            REG.add("alpha", "again")
    finally:
        for mod in [m for m in sys.modules if m == "toypkg" or m.startswith("toypkg.")]:
            del sys.modules[mod]


def test_the_registered_names_are_every_model_and_task():
    assert len(models.list_models()) == 30 and len(models.list_models(kind="set")) == 7
    assert tasks.list_tasks() == [
        "arxiv11",
        "clustering_direct",
        "clustering_mog",
        "image_generation",
        "imdb",
        "listops",
        "lra_text",
        "toy_counting",
    ]
    assert "ignores_mask" in models.model_entry("swarmformer_small").tags  # tags stated where the model is
    assert "permutation_equivariant" in models.model_entry("swarm").tags
