"""Static checks of the Windows deployment scripts (``autocad_bench_broker/windows/*.ps1``).

PowerShell cannot run here (no Windows, no ``pwsh``), so these scripts are **not executed** by
this suite. What is checked is text: the delimiters balance (with PowerShell's strings,
here-strings and comments taken into account), strict mode and stop-on-error come first, the
parameter blocks are what ``docs/windows-image.md`` documents and every parameter has help,
the token never reaches a command line, every broker option the scripts pass exists in the
broker's CLI, the readiness record they write has every field the backends read, and the
paths and field names match what the aws and local-hyperv backends use. Running them is the
windows live gate's job (see "What cannot be tested here" in ``docs/windows-image.md``).
"""

from __future__ import annotations

import re
from pathlib import Path

import click
import click.testing
import pytest

from autocad_bench_broker import cli
from autocad_bench_broker.readiness import READINESS_PATH, ReadinessRecord

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "broker-win" / "src" / "autocad_bench_broker" / "windows"
INSTALL = SCRIPTS / "Install-AutocadBenchBroker.ps1"
START = SCRIPTS / "Start-AutocadBenchBroker.ps1"

INSTALL_PARAMETERS = {
    "WheelDirectory",
    "BrokerVersion",
    "TemplateDrawing",
    "PythonExe",
    "ConsoleUser",
    "InstallRoot",
    "DataRoot",
    "DefaultPort",
    "TaskName",
    "FirewallRemoteAddress",
    "Offline",
    "NewDeployment",
}
START_PARAMETERS = {
    "InstallRoot",
    "DataRoot",
    "DefaultPort",
    "ListenAddress",
    "ConsoleUser",
    "ArmTimeoutS",
    "ReadyTimeoutS",
    "PrewarmAttempts",
    "Report",
    "ReportWaitS",
}


def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def code_lines(source: str) -> list[tuple[int, str]]:
    """(line number, code) with comments and the help block removed (strings kept)."""
    result = []
    in_block = False
    for number, line in enumerate(source.splitlines(), 1):
        stripped = line.strip()
        if in_block:
            if "#>" in stripped:
                in_block = False
            continue
        if stripped.startswith("<#"):
            in_block = "#>" not in stripped
            continue
        if stripped.startswith("#"):
            continue
        result.append((number, line))
    return result


def delimiter_problems(source: str) -> list[str]:
    """Unbalanced (), {}, [] outside strings and comments, as 'line N: ...' messages.

    Knows PowerShell's single-quoted strings ('' escapes a quote), double-quoted strings
    (backtick escapes, "" escapes a quote), here-strings (@' '@, @" "@ with the terminator at
    the start of a line), line and block comments, and backtick escapes in code.
    """
    pairs = {")": "(", "}": "{", "]": "["}
    stack: list[tuple[str, int]] = []
    problems: list[str] = []
    i, line, n = 0, 1, len(source)
    while i < n:
        char = source[i]
        if char == "\n":
            line += 1
            i += 1
        elif source.startswith("<#", i):
            end = source.find("#>", i + 2)
            if end < 0:
                return [f"line {line}: unterminated block comment"]
            line += source.count("\n", i, end)
            i = end + 2
        elif char == "#":
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif source.startswith("@'\n", i) or source.startswith('@"\n', i) or source.startswith("@'\r\n", i):
            quote = source[i + 1]
            end = source.find(f"\n{quote}@", i + 2)
            if end < 0:
                return [f"line {line}: unterminated here-string"]
            line += source.count("\n", i, end + 1)
            i = end + 3
        elif char == "'":
            j = i + 1
            while True:
                if j >= n:
                    return [f"line {line}: unterminated single-quoted string"]
                if source[j] == "'":
                    if j + 1 < n and source[j + 1] == "'":
                        j += 2
                        continue
                    break
                j += 1
            line += source.count("\n", i, j)
            i = j + 1
        elif char == '"':
            j = i + 1
            while True:
                if j >= n:
                    return [f"line {line}: unterminated double-quoted string"]
                if source[j] == "`":
                    j += 2
                    continue
                if source[j] == '"':
                    if j + 1 < n and source[j + 1] == '"':
                        j += 2
                        continue
                    break
                j += 1
            line += source.count("\n", i, j)
            i = j + 1
        elif char == "`":
            if i + 1 < n and source[i + 1] == "\n":
                line += 1
            i += 2
        elif char in "({[":
            stack.append((char, line))
            i += 1
        elif char in ")}]":
            if not stack or stack[-1][0] != pairs[char]:
                opened = f"'{stack[-1][0]}' of line {stack[-1][1]}" if stack else "nothing"
                problems.append(f"line {line}: '{char}' closes {opened}")
            else:
                stack.pop()
            i += 1
        else:
            i += 1
    problems.extend(f"line {opened}: '{char}' is never closed" for char, opened in stack)
    return problems


def param_block(source: str) -> str:
    start = source.index("[CmdletBinding()]\nparam(")
    depth, i = 0, source.index("(", start + len("[CmdletBinding()]"))
    for j in range(i, len(source)):
        depth += {"(": 1, ")": -1}.get(source[j], 0)
        if depth == 0:
            return source[i : j + 1]
    raise AssertionError("unterminated param block")


def parameters(source: str) -> set[str]:
    return set(re.findall(r"\]\s*\$([A-Za-z]+)\s*(?:=|,|\n|\))", param_block(source)))


def block(source: str, opener: str) -> str:
    """The text from ``opener`` to its matching closing delimiter (opener ends with ( or {)."""
    start = source.index(opener)
    open_char = opener[-1]
    close_char = {"(": ")", "{": "}"}[open_char]
    depth = 0
    for j in range(start + len(opener) - 1, len(source)):
        if source[j] == open_char:
            depth += 1
        elif source[j] == close_char:
            depth -= 1
            if depth == 0:
                return source[start : j + 1]
    raise AssertionError(f"{opener!r} is not closed")


def options_of(command: click.Command) -> set[str]:
    return {opt for param in command.params for opt in getattr(param, "opts", ()) if opt.startswith("--")}


def subcommand(*names: str) -> click.Command:
    command: click.Command = cli.cli
    for name in names:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None, name
        command = found
    return command


# -- text-level parse ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", [INSTALL, START], ids=lambda p: p.name)
def test_the_script_is_well_formed_text(path: Path) -> None:
    raw = path.read_bytes()
    assert not raw.startswith(b"\xef\xbb\xbf"), "UTF-8 without BOM"
    source = raw.decode("ascii")  # ASCII only: Windows PowerShell 5.1 reads BOM-less files as ANSI
    assert delimiter_problems(source) == []
    assert source.startswith("#Requires -Version 5.1\n")
    assert "\t" not in source


@pytest.mark.parametrize("path", [INSTALL, START], ids=lambda p: p.name)
def test_strict_mode_and_stop_come_right_after_the_parameters(path: Path) -> None:
    source = text(path)
    after = source[source.index(param_block(source)) + len(param_block(source)) :].lstrip("\n")
    assert after.startswith("Set-StrictMode -Version Latest\n$ErrorActionPreference = 'Stop'\n")


def test_the_checker_finds_unbalanced_delimiters() -> None:
    assert delimiter_problems("if ($a) { 'x)' }\n") == []
    assert delimiter_problems('$s = "a `" ( b"\n$t = @"\n ) }\n"@\n') == []
    assert delimiter_problems("foo { bar (\n}\n") == [
        "line 2: '}' closes '(' of line 1",
        "line 1: '{' is never closed",
        "line 1: '(' is never closed",
    ]
    assert delimiter_problems("$x = 'open\n") == ["line 1: unterminated single-quoted string"]


@pytest.mark.parametrize(
    ("path", "expected"), [(INSTALL, INSTALL_PARAMETERS), (START, START_PARAMETERS)], ids=["install", "start"]
)
def test_parameters_are_the_documented_ones_and_each_has_help(path: Path, expected: set[str]) -> None:
    source = text(path)
    assert parameters(source) == expected
    for name in expected:
        assert re.search(rf"^\.PARAMETER {name}$", source, re.MULTILINE), f".PARAMETER {name} is missing"
    assert ".SYNOPSIS" in source and ".DESCRIPTION" in source and ".EXAMPLE" in source
    doc = text(ROOT / "docs" / "windows-image.md")
    for name in expected:
        assert f"-{name}" in doc, f"docs/windows-image.md does not mention -{name}"


def test_install_requires_elevation_and_mandatory_inputs() -> None:
    source = text(INSTALL)
    assert "#Requires -RunAsAdministrator" in source
    block_text = param_block(source)
    for name in ("WheelDirectory", "BrokerVersion", "TemplateDrawing"):
        assert re.search(rf"\[Parameter\(Mandatory = \$true\)\][^\n]*\${name}\b", block_text), name


# -- the token -----------------------------------------------------------------------------------


def test_the_token_never_reaches_a_command_line() -> None:
    start, install = text(START), text(INSTALL)
    for source in (start, install):
        assert "--token" not in source.lower()
        for number, line in code_lines(source):
            if re.search(r"token", line, re.IGNORECASE):
                # Only an environment block may carry it on a line that starts a process.
                outside = re.sub(r"-Environment @\{[^}]*\}", "", line)
                if re.search(r"token", outside, re.IGNORECASE):
                    assert not re.search(r"Argument|\$serve\b|\$write\b|\$pip\b", outside), f"line {number}"
    # The installer never handles a token at all (only its help text mentions one).
    assert not [line for _, line in code_lines(install) if "token" in line.lower()]
    # The serve command line is built from paths and ids only.
    serve = block(start, "$serve = @(")
    assert "Token" not in serve and "$arm.Token" not in serve
    # The token goes into the broker's environment block and the /health header, nowhere else.
    uses = [line.strip() for _, line in code_lines(start) if "$arm.Token" in line]
    assert uses == [
        "$info = New-StartInfo -ArgumentList $serve -Environment @{ $TokenVariable = $arm.Token }",
        "$headers = @{ Authorization = 'Bearer ' + $arm.Token }",
    ]
    assert "$TokenVariable = 'AUTOCAD_BENCH_BROKER_TOKEN'" in start
    assert "$info.EnvironmentVariables[$name]" in start
    # Nothing the token touches is logged or written.
    for _, line in code_lines(start):
        if "Write-Log" in line or "Write-Status" in line or "Write-JsonFile" in line:
            assert "Token" not in line and "$secret" not in line and "$headers" not in line


def test_the_scheduled_task_action_holds_paths_only() -> None:
    install = text(INSTALL)
    arguments = next(line for _, line in code_lines(install) if line.startswith("$taskArguments = "))
    assert "-File" in arguments and "token" not in arguments.lower()
    assert "-AtLogOn -User $ConsoleUser" in install
    assert "-UserId $ConsoleUser -LogonType Interactive -RunLevel Highest" in install
    assert "-ExecutionTimeLimit ([TimeSpan]::Zero)" in install and "-MultipleInstances IgnoreNew" in install
    assert "Register-ScheduledTask -TaskName $TaskName" in install and "-Force" in install


def test_protected_directories_are_acled_by_sid() -> None:
    install = text(INSTALL)
    assert "foreach ($sid in @('S-1-5-18', 'S-1-5-32-544'))" in install
    assert "SetAccessRuleProtection($true, $false)" in install
    assert "Set-AdministratorsOnlyAcl -Path $DataRoot -Directory" in install
    assert "Set-AdministratorsOnlyAcl -Path $ManifestPath" in install


# -- agreement with the broker CLI and the backends -----------------------------------------------


def quoted_options(source: str) -> set[str]:
    return set(re.findall(r"'(--[a-z][a-z0-9-]*)'", source))


def test_every_option_the_scripts_pass_exists() -> None:
    start, install = text(START), text(INSTALL)
    serve = block(start, "$serve = @(")
    assert quoted_options(serve) <= options_of(subcommand("serve"))
    assert {"--manifest", "--readiness", "--startup-id", "--log-file", "--ready-file"} <= quoted_options(serve)
    assert "'--app', 'autocad'" in serve
    verify = next(line for _, line in code_lines(start) if "'manifest', 'verify'" in line)
    assert quoted_options(verify) <= options_of(subcommand("manifest", "verify"))
    prewarm = next(line for _, line in code_lines(start) if "@('prewarm'" in line)
    assert quoted_options(prewarm) <= options_of(subcommand("prewarm"))
    report = next(line for _, line in code_lines(start) if "'readiness-report'" in line)
    assert quoted_options(report) | {"--status"} <= options_of(subcommand("readiness-report"))
    write = block(install, "$write = @(")
    assert quoted_options(write) <= options_of(subcommand("manifest", "write"))
    for option in ("--input-driver-archive", "--new-deployment"):
        assert f"'{option}'" in install and option in options_of(subcommand("manifest", "write"))
    for distribution in ("autocad-bench-broker", "autocad-bench", "pyautogui"):
        assert f"'--distribution', '{distribution}'" in write


def record_keys(source: str) -> set[str]:
    return set(re.findall(r"^\s+([a-z0-9_]+) = ", block(source, "$record = [ordered]@{"), re.MULTILINE))


def test_the_written_record_has_every_field_the_readers_need() -> None:
    keys = record_keys(text(START))
    required = {name for name, field in ReadinessRecord.model_fields.items() if field.is_required()}
    assert required <= keys
    assert keys <= set(ReadinessRecord.model_fields)
    aws = pytest.importorskip("autocad_bench_aws.readiness")
    hyperv = pytest.importorskip("autocad_bench_hyperv.guest")
    for model in (aws.BrokerReadiness, hyperv.BrokerReadiness):
        needed = {name for name, field in model.model_fields.items() if field.is_required()}
        assert needed <= keys, f"{model.__module__} needs {needed - keys}"


def test_paths_and_arm_records_match_the_backends() -> None:
    start, install = text(START), text(INSTALL)
    aws_readiness = pytest.importorskip("autocad_bench_aws.readiness")
    aws_worker = pytest.importorskip("autocad_bench_aws.worker")
    hyperv = pytest.importorskip("autocad_bench_hyperv.guest")
    install_root = "C:\\Program Files\\AutoCADBench"
    data_root = "C:\\ProgramData\\AutoCADBench"
    for source in (start, install):
        assert f"[string]$InstallRoot = '{install_root}'" in source
        assert f"[string]$DataRoot = '{data_root}'" in source
    # aws runs <InstallRoot>\bin\readiness.ps1, which the installer generates.
    assert install_root + "\\bin\\readiness.ps1" == aws_readiness.READINESS_SCRIPT
    assert "$ReadinessScript = Join-Path $BinDir 'readiness.ps1'" in install and "-Report" in install
    # local-hyperv reads the record at <DataRoot>\state\ready.json; so does /health via --readiness.
    assert hyperv.READY_FILE == READINESS_PATH == data_root + "\\state\\ready.json"
    assert "$ReadinessPath = Join-Path $StateDir 'ready.json'" in start
    assert "$StateDir = Join-Path $DataRoot 'state'" in start
    # The two arm records and the field that holds the token in each.
    assert data_root + "\\secret\\arm.json" == hyperv.ARM_FILE and "token = $Token" in hyperv.ARM_SCRIPT
    assert "$HyperVArmPath = Join-Path $DataRoot 'secret\\arm.json'" in start
    assert "Path = $HyperVArmPath; TokenField = 'token'" in start
    assert data_root + "\\rollout.json" == aws_worker.CONFIG_PATH
    assert {"broker_token", "broker_port"} <= set(aws_worker.WorkerConfig.model_fields)
    assert "$AwsArmPath = Join-Path $DataRoot 'rollout.json'" in start
    assert "Path = $AwsArmPath; TokenField = 'broker_token'" in start
    assert "Get-Field -Object $record -Name 'broker_port'" in start


def test_the_start_script_checks_identity_before_writing_readiness() -> None:
    start = text(START)
    body = start[start.index("function Start-Main {") :]
    order = [
        "'manifest', 'verify'",
        "Read-ArmRecord",
        "@('prewarm'",
        "[System.Diagnostics.Process]::Start($info)",
        "/health",
        "Write-JsonFile -Path $ReadinessPath",
        "$broker.WaitForExit()",
    ]
    positions = [body.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "Get-CimInstance -ClassName Win32_OperatingSystem).LastBootUpTime" in start
    assert "Remove-Item -Force -LiteralPath $ReadinessPath, $BrokerReadyPath" in body
    assert "(Get-Process -Id $brokerPid).SessionId" in body
    assert "ConvertTo-Json -InputObject $Value -Depth 8 -Compress" in start
    assert "New-Object System.Text.UTF8Encoding($false)" in start


def test_the_scripts_ship_in_the_package_and_copy_out(tmp_path: Path) -> None:
    """Operators without a checkout get the scripts from the installed broker, never overwriting."""
    runner = click.testing.CliRunner()
    result = runner.invoke(cli.cli, ["windows-scripts", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    for script in (INSTALL, START):
        assert (tmp_path / "out" / script.name).read_bytes() == script.read_bytes()
    (tmp_path / "out" / START.name).write_text("mine")
    again = runner.invoke(cli.cli, ["windows-scripts", str(tmp_path / "out")])
    assert again.exit_code == 2 and "already exists" in again.output
    assert (tmp_path / "out" / START.name).read_text() == "mine"
