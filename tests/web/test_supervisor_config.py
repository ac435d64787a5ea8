"""The supervisord configuration `make run` generates from the Procfile, read back by supervisord's
own parser: one program per requested Procfile process, its command the Procfile's, restarted
whenever it exits."""
from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from supervisor.datatypes import RestartUnconditionally
from supervisor.options import ServerOptions

from hermes_web.config import BASE_DIR
from hermes_web.procs import procfile_processes, supervisor_config


def realize(tmp_path: Path, procfile: Path, names: list[str]) -> dict:
    conf = tmp_path / "supervisord.conf"
    conf.write_text(supervisor_config(procfile=procfile, names=names, directory=BASE_DIR, run_dir=tmp_path,
                                      password="a-password"))
    options = ServerOptions()
    options.realize(args=["-c", str(conf)])
    return {p.name: p for group in options.process_group_configs for p in group.process_configs}


def test_every_requested_procfile_process_is_a_program_that_restarts(tmp_path):
    procfile = BASE_DIR / "Procfile"
    programs = realize(tmp_path, procfile, ["redis", "web", "worker"])
    assert set(programs) == {"redis", "web", "worker"}
    commands = procfile_processes(procfile)
    for name, program in programs.items():
        shell, flag, script = shlex.split(program.command)
        assert (shell, flag) == ("/bin/sh", "-c")
        # The shell becomes the program (exec), through setpriv where it exists.
        assert script in (f"exec {commands[name]}", f"exec setpriv --pdeathsig TERM {commands[name]}")
        assert program.autorestart is RestartUnconditionally
        assert program.stopasgroup and program.killasgroup
        assert program.directory == str(BASE_DIR)
    assert programs["redis"].priority < programs["web"].priority  # Redis starts first


def test_a_percent_sign_in_a_command_reaches_the_program_unchanged(tmp_path):
    procfile = tmp_path / "Procfile"
    procfile.write_text("worker: celery -A hermes_web worker -n worker@%h\n")
    program = realize(tmp_path, procfile, ["worker"])["worker"]
    assert shlex.split(program.command)[-1].endswith(" celery -A hermes_web worker -n worker@%h")


def test_a_process_missing_from_the_procfile_is_named(tmp_path):
    with pytest.raises(ValueError, match="no process named beat"):
        supervisor_config(procfile=BASE_DIR / "Procfile", names=["web", "beat"], directory=BASE_DIR,
                          run_dir=tmp_path, password="x")
