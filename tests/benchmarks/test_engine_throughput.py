"""benchmarks/engine_throughput.py refuses bad options in one line before it times anything."""

import pytest

from benchmarks import engine_throughput


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--device", "cpu", "--graph-compile", "default"], "--graph-compile needs --device cuda"),
        (["--device", "cpu", "--compile", "max"], "--compile: unknown mode(s) max"),
        (["--device", "cpu", "--eval-compile", "fast"], "--eval-compile: unknown mode(s) fast"),
        (["--device", "cpu", "--eval-batch", "256,big"], "--eval-batch must be comma-separated integers"),
        (["--device", "cpu", "--eval-rows", "10", "--eval-batch", "0"], "--eval-batch, --rounds, --steps"),
    ],
)
def test_bad_options_are_one_line_before_any_timing(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        engine_throughput.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr()
    assert message in err.err and "engine throughput" not in err.out
