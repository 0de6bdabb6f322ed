"""Scripts, their rendering, both command runners, and the fake host's strictness."""

from __future__ import annotations

import base64
import stat
import sys
from pathlib import Path

import pytest

from autocad_bench_hyperv.commands import Script, Secret, cmd, quote, select, to_json
from autocad_bench_hyperv.hyperv import HostClient
from autocad_bench_hyperv.runner import (
    SECRET_ENV_PREFIX,
    HostCommandError,
    LocalPowerShellRunner,
    PsrpRunner,
    parse_output,
)
from autocad_bench_hyperv.settings import LocalConnection, PsrpConnection
from tests.hyperv.conftest import GUEST_PASSWORD, Lab
from tests.hyperv.fakehyperv import FakeHyperVHost, Parser

SECRET = "s3cret-value-'quoted'-\u2019-9f1b"


def _runner(host: FakeHyperVHost) -> LocalPowerShellRunner:
    return LocalPowerShellRunner(host.name, LocalConnection(kind="local"), environ={"PATH": "/x"},
                                 executor=host.execute)


def _host() -> FakeHyperVHost:
    return FakeHyperVHost("hv1", ["acad-01", "it's a VM"], guest_username="Administrator",
                          guest_password=GUEST_PASSWORD)


def test_literals_are_quoted_so_nothing_is_expanded() -> None:
    assert quote("a'b") == "'a''b'"
    assert quote("$env:X; Stop-Computer") == "'$env:X; Stop-Computer'"
    assert quote("\u2018x\u2019") == "'\u2018\u2018x\u2019\u2019'"
    parser = Parser(quote("it's $(evil) `n"))
    assert parser.string() == "it's $(evil) `n"


def test_the_local_runner_keeps_secrets_out_of_argv_and_script_text() -> None:
    runner = LocalPowerShellRunner("hv1", LocalConnection(kind="local"), environ={"PATH": "/x"},
                                   executor=lambda argv, env, timeout: (0, "", ""))
    script = Script("guest", ((cmd("ConvertTo-SecureString", "AsPlainText", "Force", String=Secret(0)),),),
                    secrets=(SECRET,))
    argv, env = runner.command_line(script)
    text = base64.b64decode(argv[-1]).decode("utf-16-le")
    assert argv[:-1] == ["powershell.exe", "-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass",
                         "-EncodedCommand"]
    assert all(SECRET not in arg for arg in argv) and SECRET not in text
    assert env[f"{SECRET_ENV_PREFIX}0"] == SECRET and env["PATH"] == "/x"
    assert f"$AbSecret0 = $env:{SECRET_ENV_PREFIX}0\nRemove-Item -Path Env:{SECRET_ENV_PREFIX}0" in text
    assert "-String $AbSecret0" in text


def test_errors_are_scrubbed_of_secrets() -> None:
    runner = LocalPowerShellRunner("hv1", LocalConnection(kind="local"), environ={},
                                   executor=lambda argv, env, timeout: (1, "", f"Invoke-Command : bad {SECRET} x"))
    with pytest.raises(HostCommandError) as caught:
        runner.run(Script("x", ((cmd("Get-VM"),),), secrets=(SECRET,)))
    assert SECRET not in str(caught.value) and "***" in str(caught.value)


def test_output_is_always_a_list() -> None:
    assert parse_output("") == []
    assert parse_output('{"Name":"a"}\n') == [{"Name": "a"}]
    assert parse_output('[{"Name":"a"},{"Name":"b"}]') == [{"Name": "a"}, {"Name": "b"}]


def test_vm_names_with_quotes_round_trip_through_the_fake_host() -> None:
    host = _host()
    client = HostClient(_runner(host))
    listed = client.list_vms()
    assert set(listed) == {"acad-01", "it's a VM"}
    assert listed["acad-01"].state == "Off"  # the number 3 in Windows PowerShell 5.1 JSON
    assert client.swap_notes("it's a VM", listed["it's a VM"].notes, "{\"x\": \"it's\"}")
    assert host.vms["it's a VM"].notes == "{\"x\": \"it's\"}"


@pytest.mark.parametrize(("command", "message"), [
    (cmd("Get-VMs"), "is not recognized as the name of a cmdlet"),
    (cmd("Stop-VM", "Kill", Name="acad-01"), "parameter name 'Kill'"),
    (cmd("Restore-VMCheckpoint", VMName="acad-01", Name="autocad-bench-clean"), "parameter name 'VMName'"),
    (cmd("Get-VM", Name="nope"), 'unable to find a virtual machine with name "nope"'),
    (cmd("Get-VMCheckpoint", VMName="acad-01", Name="other"), "Unable to find a snapshot"),
])
def test_the_fake_host_rejects_what_hyper_v_would_reject(command: object, message: str) -> None:
    host = _host()
    with pytest.raises(HostCommandError) as caught:
        _runner(host).run(Script("bad", ((command,),)))  # type: ignore[arg-type]
    assert message in str(caught.value)


def test_the_fake_host_needs_the_prelude_and_exact_glue() -> None:
    host = _host()
    code, _, err = host.execute(["-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass",
                                 "-EncodedCommand", base64.b64encode("Get-VM".encode("utf-16-le")).decode()], {})
    assert code == 1 and "ErrorActionPreference" in err
    script = LocalPowerShellRunner.script_text(Script("x", ((cmd("Get-VM"), select("Name"), to_json()),),
                                                      exclusive=True))
    broken = script.replace("WaitOne(30000)", "WaitOne(1)")
    code, _, err = host.execute(["-NoLogo", "-NoProfile", "-NonInteractive", "-ExecutionPolicy", "Bypass",
                                 "-EncodedCommand", base64.b64encode(broken.encode("utf-16-le")).decode()], {})
    assert code == 1 and "glue" in err


def test_stop_vm_on_an_off_vm_is_never_sent() -> None:
    host = _host()
    client = HostClient(_runner(host))
    client.turn_off("acad-01")  # filtered by State: Stop-VM receives no Off VM (the fake would refuse it)
    assert host.cmdlets == ["Get-VM", "Where-Object", "Stop-VM"]
    assert "turn-off" not in host.vms["acad-01"].history


def _powershell(tmp_path: Path, body: str) -> str:
    path = tmp_path / "powershell"
    path.write_text(f"#!{sys.executable}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_the_local_runner_runs_a_real_process(lab: Lab, tmp_path: Path) -> None:
    lab.add_host("hv1", ["acad-01"])
    runner = LocalPowerShellRunner("hv1", LocalConnection(kind="local", powershell=lab.powershell_script("hv1")))
    client = HostClient(runner)
    assert client.list_vms()["acad-01"].state == "Off"
    with pytest.raises(HostCommandError) as caught:
        client.get_vm("missing")
    assert "unable to find a virtual machine" in caught.value.message and not caught.value.transient


def test_the_local_runner_kills_a_hung_powershell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOCAD_BENCH_HYPERV_TIME_SCALE", "0.005")
    hung = _powershell(tmp_path, "import time\ntime.sleep(30)")
    runner = LocalPowerShellRunner("hv1", LocalConnection(kind="local", powershell=hung))
    with pytest.raises(HostCommandError) as caught:
        runner.run(Script("hang", ((cmd("Get-VM"),),)))
    assert caught.value.transient and "no result within" in caught.value.message


def test_a_missing_powershell_is_a_clear_error(tmp_path: Path) -> None:
    runner = LocalPowerShellRunner("hv1", LocalConnection(kind="local", powershell=str(tmp_path / "nope.exe")))
    with pytest.raises(HostCommandError) as caught:
        runner.run(Script("x", ((cmd("Get-VM"),),)))
    assert "cannot run" in caught.value.message


def test_psrp_binds_secrets_as_parameters_not_text() -> None:
    from pypsrp.powershell import RunspacePool
    from pypsrp.wsman import WSMan

    connection = PsrpConnection(kind="psrp", server="hv01.example.invalid", username_env="U", password_env="P")
    runner = PsrpRunner("hv01", connection, environ={"U": "lab\\bench", "P": "pw"})
    pool = RunspacePool(WSMan("hv01.example.invalid", username="u", password="p"))
    pool.protocol_version = "2.3"  # what an opened pool negotiates; nothing is sent here
    script = Script("guest", ((cmd("ConvertTo-SecureString", "AsPlainText", "Force", String=Secret(0)),),),
                    secrets=(SECRET,))
    shell = runner.pipeline(pool, script)
    [command] = shell.commands
    assert command.is_script
    assert command.cmd.startswith("param($AbSecret0)\n$ErrorActionPreference = 'Stop'")
    assert SECRET not in command.cmd
    assert [(a.name, a.value) for a in command.args] == [("AbSecret0", SECRET)]
    assert connection.resolved_port == 5986


def test_psrp_without_credentials_names_the_variables() -> None:
    connection = PsrpConnection(kind="psrp", server="hv01.example.invalid", username_env="HV_USER",
                                password_env="HV_PASS")
    runner = PsrpRunner("hv01", connection, environ={})
    with pytest.raises(HostCommandError) as caught:
        runner.run(Script("x", ((cmd("Get-VM"),),)))
    assert "HV_USER" in caught.value.message and "HV_PASS" in caught.value.message
