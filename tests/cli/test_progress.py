"""Progress on a terminal: the running stage and the elapsed time on one line, cleared at the end; nothing
when the stream is not a terminal."""
from __future__ import annotations

import io

import cglow
from cglow import zoo
from cglow.tools.progress import Progress
from cglow.stages import Stages


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def ticks():
    """A clock that advances 1.5 s per reading."""
    t = iter(range(1000))
    return lambda: next(t) * 1.5


def test_stages_overwrite_one_line_then_clear_it():
    stream = FakeTerminal()
    with Progress(stream, ticks()) as progress:
        stages = Stages(progress)
        assert stages.run("import", lambda: 7) == 7
        assert stages.run("fold_batchnorm", str.upper, "x") == "X"
        stages.run("lower", list)
    # the clock reads 0 at the start, then once per stage; a shorter line covers the longer one before it
    assert stream.getvalue() == ("\rcglow: 1.5 s import"
                                 "\rcglow: 3.0 s fold_batchnorm"
                                 "\rcglow: 4.5 s lower" + " " * 9 +
                                 "\r" + " " * len("cglow: 4.5 s lower") + "\r")


def test_compiling_shows_every_stage_on_a_terminal_only():
    terminal, pipe = FakeTerminal(), io.StringIO()
    with Progress(terminal) as shown, Progress(pipe) as hidden:
        compiled = cglow.compile_model(zoo.build("autoencoder"), stages=Stages(shown, hidden))
    stages = [line.split(" s ", 1)[1].rstrip() for line in terminal.getvalue().split("\r") if line.strip()]
    assert stages[0] == "import" and stages[-2:] == ["alloc", "emit"] and "lower" in stages
    assert "instr-schedule" in stages and len(stages) > 15
    assert terminal.getvalue().endswith("\r") and "\n" not in terminal.getvalue()
    assert pipe.getvalue() == ""
    assert compiled.c_source == cglow.compile_model(zoo.build("autoencoder")).c_source

