"""Status lines through logging: the message alone, INFO on stdout, warnings on stderr, SWARMLAB_LOG_LEVEL obeyed."""

from __future__ import annotations

import pytest

from swarmlab.errors import SwarmlabError
from swarmlab.log import configure, get_logger


@pytest.fixture
def level(monkeypatch):
    def set_level(value: str | None):
        if value is None:
            monkeypatch.delenv("SWARMLAB_LOG_LEVEL", raising=False)
        else:
            monkeypatch.setenv("SWARMLAB_LOG_LEVEL", value)
        configure()

    yield set_level
    monkeypatch.delenv("SWARMLAB_LOG_LEVEL", raising=False)
    configure()


def test_info_is_the_bare_message_on_stdout_and_warnings_go_to_stderr(capsys, level):
    level(None)
    log = get_logger("tasks.some_module")
    assert log.name == "swarmlab.tasks.some_module"
    log.info("[train imdb] start swarm-seed0")
    log.warning("careful")
    out, err = capsys.readouterr()
    assert out == "[train imdb] start swarm-seed0\n" and err == "careful\n"


def test_the_level_hides_status_lines_but_keeps_problems(capsys, level):
    level("warning")
    log = get_logger("swarmlab.drive.training.run")
    log.info("a status line")
    log.error("error: something")
    out, err = capsys.readouterr()
    assert out == "" and err == "error: something\n"


def test_a_bad_level_is_one_clear_error(level):
    with pytest.raises(SwarmlabError, match=r"SWARMLAB_LOG_LEVEL='LOUD' is not one of DEBUG, INFO, WARNING, ERROR"):
        level("loud")


def test_the_handler_is_attached_once():
    import logging

    from swarmlab.log import ConsoleHandler

    for _ in range(3):
        get_logger("x")
        configure()
    assert sum(isinstance(h, ConsoleHandler) for h in logging.getLogger("swarmlab").handlers) == 1


def test_a_stage_reports_a_bad_level_as_its_one_line_error(monkeypatch, capsys):
    from swarmlab.errors import cli

    monkeypatch.setenv("SWARMLAB_LOG_LEVEL", "loud")
    ran = []
    with pytest.raises(SystemExit) as exit_:
        cli(lambda: ran.append(1))()
    monkeypatch.delenv("SWARMLAB_LOG_LEVEL")
    configure()
    assert exit_.value.code == 2 and not ran
    assert capsys.readouterr().err == "error: SWARMLAB_LOG_LEVEL='LOUD' is not one of DEBUG, INFO, WARNING, ERROR\n"
