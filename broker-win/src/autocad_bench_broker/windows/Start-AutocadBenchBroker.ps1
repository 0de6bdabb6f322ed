#Requires -Version 5.1
<#
.SYNOPSIS
  Start the autocad-bench broker in the interactive console session and write the current-boot
  readiness record (the action of the AutoCADBenchBroker scheduled task).

.DESCRIPTION
  Install-AutocadBenchBroker.ps1 copies this script to <InstallRoot>\bin and registers it as the
  scheduled task that runs at log on of the autologon console user (interactive, highest
  privileges, never session 0). At every boot it:

    1. removes the readiness files an earlier start left and stops a broker this boot already
       started (a task restart), then empties the broker's runtime directory;
    2. verifies the deployment manifest (autocad-bench-broker manifest verify): every deployed
       file and the installed PyAutoGUI must match it, otherwise the broker is not started;
    3. waits (bounded by -ArmTimeoutS) for the rollout's arm record, the protected file that
       carries the per-rollout bearer token:
         <DataRoot>\secret\arm.json  (local-hyperv: written by PowerShell Direct; field token)
         <DataRoot>\rollout.json     (aws: written from user data;          field broker_token)
    4. runs the real pointer prewarm (autocad-bench-broker prewarm: a PyAutoGUI move to the
       desktop centre and back, read back with GetCursorPos, on WinSta0\Default), retried a few
       times while the desktop comes up;
    5. starts autocad-bench-broker serve --app autocad ... --manifest <manifest> with the token
       in the broker's environment only (never argv), a fresh startup id, --readiness and
       --ready-file;
    6. waits for the broker's ready file, asks its authenticated /health for its identity,
       cross-checks pid, session, startup id and manifest checksum, and writes
       <DataRoot>\state\ready.json atomically (the readiness record; format
       autocad-bench-readiness/1, see docs/windows-image.md);
    7. stays running while the broker runs (so the task's state is the broker's) and removes
       its readiness record when the broker exits.

  With -Report it does none of that: it prints the AWS readiness report (one JSON line: the
  current boot and the readiness record) and exits. <InstallRoot>\bin\readiness.ps1 calls it so.

  Progress and failures go to <DataRoot>\logs\start-broker.log and <DataRoot>\state\start-status.json.
  The token is never logged, never written anywhere, never passed on a command line.

  Exit codes: 0 the broker shut down cleanly; 1 unexpected failure; 3 no arm record in time;
  4 the broker did not become ready; 5 the manifest did not verify; 6 the broker exited with a
  failure.

  This script runs only on Windows. The Linux test suite checks it as text only; the windows
  live gate (docs/windows-image.md, "What cannot be tested here") is what runs it.

.PARAMETER InstallRoot
  Installation directory (venv, bin, wheels, template.dwg). Default C:\Program Files\AutoCADBench.

.PARAMETER DataRoot
  Data directory (manifest.json, secret\, state\, runtime\, logs\), readable by SYSTEM and
  Administrators only. Default C:\ProgramData\AutoCADBench.

.PARAMETER DefaultPort
  Broker port when the arm record names none (local-hyperv: guest_broker_port). Default 8765.

.PARAMETER ListenAddress
  Address the broker listens on. 'auto' (default): 127.0.0.1 for an aws rollout.json (reached
  through SSM port forwarding), 0.0.0.0 for a local-hyperv arm.json (reached from the host).

.PARAMETER ConsoleUser
  The autologon user whose console session the broker must run in. Default Administrator.

.PARAMETER ArmTimeoutS
  Longest wait for the arm record. Default 1800.

.PARAMETER ReadyTimeoutS
  Longest wait for the broker to listen. Default 300.

.PARAMETER PrewarmAttempts
  Pointer prewarm attempts, 3 s apart, before the result is recorded as it is. Default 5.

.PARAMETER Report
  Print the readiness report for the aws backend and exit (no broker is started).

.PARAMETER ReportWaitS
  With -Report: longest wait for a record of the current boot. Default 100.

.EXAMPLE
  powershell.exe -NoProfile -ExecutionPolicy Bypass -File "C:\Program Files\AutoCADBench\bin\Start-AutocadBenchBroker.ps1" -Report
#>
[CmdletBinding()]
param(
  [string]$InstallRoot = 'C:\Program Files\AutoCADBench',
  [string]$DataRoot = 'C:\ProgramData\AutoCADBench',
  [ValidateRange(1, 65535)][int]$DefaultPort = 8765,
  [ValidatePattern('^(auto|[0-9A-Fa-f:.]+)$')][string]$ListenAddress = 'auto',
  [string]$ConsoleUser = 'Administrator',
  [ValidateRange(1, 86400)][int]$ArmTimeoutS = 1800,
  [ValidateRange(1, 3600)][int]$ReadyTimeoutS = 300,
  [ValidateRange(1, 20)][int]$PrewarmAttempts = 5,
  [switch]$Report,
  [ValidateRange(0, 600)][int]$ReportWaitS = 100
)
Set-StrictMode -Version Latest
$ErrorActionPreference = 'Stop'

$InstallRoot = [System.IO.Path]::GetFullPath($InstallRoot).TrimEnd('\')
$DataRoot = [System.IO.Path]::GetFullPath($DataRoot).TrimEnd('\')
$Python = Join-Path $InstallRoot 'venv\Scripts\python.exe'
$Template = Join-Path $InstallRoot 'template.dwg'
$ManifestPath = Join-Path $DataRoot 'manifest.json'
$StateDir = Join-Path $DataRoot 'state'
$ReadinessPath = Join-Path $StateDir 'ready.json'
$BrokerReadyPath = Join-Path $StateDir 'broker-ready.json'
$ProcessPath = Join-Path $StateDir 'broker-process.json'
$StatusPath = Join-Path $StateDir 'start-status.json'
$RuntimeDir = Join-Path $DataRoot 'runtime'
$LogDir = Join-Path $DataRoot 'logs'
$LogPath = Join-Path $LogDir 'start-broker.log'
$BrokerLogPath = Join-Path $LogDir 'broker.log'
$HyperVArmPath = Join-Path $DataRoot 'secret\arm.json'
$AwsArmPath = Join-Path $DataRoot 'rollout.json'
$TokenVariable = 'AUTOCAD_BENCH_BROKER_TOKEN'
$Utf8NoBom = New-Object System.Text.UTF8Encoding($false)

function Write-Log {
  param([Parameter(Mandatory = $true)][string]$Message)
  $line = '{0} {1}' -f (Get-Date).ToUniversalTime().ToString('o'), $Message
  try {
    New-Item -ItemType Directory -Force -Path $LogDir | Out-Null
    [System.IO.File]::AppendAllText($LogPath, $line + [Environment]::NewLine, $Utf8NoBom)
  } catch {
    Write-Verbose $line
  }
}

function Write-JsonFile {
  # Atomic for readers: a temporary file in the same directory, then a rename.
  param([Parameter(Mandatory = $true)][string]$Path, [Parameter(Mandatory = $true)][object]$Value)
  $json = ConvertTo-Json -InputObject $Value -Depth 8 -Compress
  $tmp = '{0}.{1}.tmp' -f $Path, [guid]::NewGuid().ToString('N')
  [System.IO.File]::WriteAllText($tmp, $json, $Utf8NoBom)
  Move-Item -Force -LiteralPath $tmp -Destination $Path
}

function Read-JsonFile {
  param([Parameter(Mandatory = $true)][string]$Path)
  $text = [System.IO.File]::ReadAllText($Path, [System.Text.Encoding]::UTF8)
  return (ConvertFrom-Json -InputObject $text)
}

function Get-Field {
  # Property of a parsed JSON object, or $null when absent (StrictMode forbids a plain access).
  param([AllowNull()][object]$Object, [Parameter(Mandatory = $true)][string]$Name)
  if ($null -eq $Object) { return $null }
  $property = $Object.PSObject.Properties[$Name]
  if ($null -eq $property) { return $null }
  return $property.Value
}

function Write-Status {
  param([Parameter(Mandatory = $true)][string]$Phase, [AllowNull()][object]$ErrorMessage = $null, [int]$ExitCode = -1)
  $status = [ordered]@{
    format = 'autocad-bench-start-status/1'
    phase = $Phase
    at = (Get-Date).ToUniversalTime().ToString('o')
    startup_id = $script:StartupId
    error = $ErrorMessage
    exit_code = $ExitCode
  }
  try { Write-JsonFile -Path $StatusPath -Value $status } catch { Write-Log "cannot write the status file: $($_.Exception.Message)" }
  Write-Log ("phase {0}{1}" -f $Phase, $(if ($ErrorMessage) { ': ' + $ErrorMessage } else { '' }))
}

function ConvertTo-ArgumentString {
  # One Windows command line from separate arguments (the quoting rules of the C runtime,
  # which Python uses to split it again).
  param([string[]]$Arguments)
  $parts = foreach ($argument in $Arguments) {
    if ($argument.Length -gt 0 -and $argument -notmatch '[\s"]') {
      $argument
    } else {
      $escaped = [regex]::Replace($argument, '(\\*)"', '$1$1\"')
      $escaped = [regex]::Replace($escaped, '(\\+)$', '$1$1')
      '"' + $escaped + '"'
    }
  }
  return ($parts -join ' ')
}

function Stop-ProcessTree {
  param([Parameter(Mandatory = $true)][int]$ProcessId)
  $taskkill = Join-Path $env:SystemRoot 'System32\taskkill.exe'
  $kill = Start-Process -FilePath $taskkill -ArgumentList @('/PID', "$ProcessId", '/T', '/F') -WindowStyle Hidden -PassThru
  if (-not $kill.WaitForExit(15000)) { Write-Log "taskkill of $ProcessId did not finish within 15 s" }
}

function New-StartInfo {
  param([Parameter(Mandatory = $true)][string[]]$ArgumentList, [hashtable]$Environment = @{})
  $info = New-Object System.Diagnostics.ProcessStartInfo
  $info.FileName = $Python
  $info.Arguments = ConvertTo-ArgumentString -Arguments $ArgumentList
  $info.WorkingDirectory = $InstallRoot
  $info.UseShellExecute = $false
  $info.CreateNoWindow = $true
  $info.RedirectStandardOutput = $true
  $info.RedirectStandardError = $true
  foreach ($name in $Environment.Keys) { $info.EnvironmentVariables[$name] = [string]$Environment[$name] }
  return $info
}

function Invoke-Broker {
  # Run one autocad-bench-broker subcommand to completion within TimeoutS; returns its exit
  # code and output. It inherits this session, window station and desktop.
  param([Parameter(Mandatory = $true)][string[]]$ArgumentList, [Parameter(Mandatory = $true)][int]$TimeoutS)
  $process = [System.Diagnostics.Process]::Start((New-StartInfo -ArgumentList (@('-m', 'autocad_bench_broker') + $ArgumentList)))
  $stdout = $process.StandardOutput.ReadToEndAsync()
  $stderr = $process.StandardError.ReadToEndAsync()
  if (-not $process.WaitForExit($TimeoutS * 1000)) {
    Stop-ProcessTree -ProcessId $process.Id
    throw ('autocad-bench-broker {0} did not finish within {1} s' -f $ArgumentList[0], $TimeoutS)
  }
  $process.WaitForExit()
  if ($stderr.Result) { Write-Log ('{0} stderr: {1}' -f $ArgumentList[0], $stderr.Result.Trim()) }
  return [pscustomobject]@{ ExitCode = $process.ExitCode; StdOut = $stdout.Result }
}

function ConvertFrom-JsonLine {
  # The last line of Text that is a JSON object, parsed; $null if there is none.
  param([AllowNull()][string]$Text)
  if (-not $Text) { return $null }
  $lines = @($Text -split "`r?`n" | Where-Object { $_.Trim().StartsWith('{') })
  if ($lines.Count -eq 0) { return $null }
  return (ConvertFrom-Json -InputObject $lines[$lines.Count - 1])
}

function Get-BootTime {
  return (Get-CimInstance -ClassName Win32_OperatingSystem).LastBootUpTime.ToUniversalTime()
}

function Read-ArmRecord {
  # The first arm record that parses and carries a token: hashtable with Token, RolloutId,
  # BatchId, AttemptId, Port, Listen, Source. $null when none is there (yet).
  $candidates = @(
    @{ Path = $HyperVArmPath; TokenField = 'token'; Listen = '0.0.0.0'; Source = 'local-hyperv' },
    @{ Path = $AwsArmPath; TokenField = 'broker_token'; Listen = '127.0.0.1'; Source = 'aws' }
  )
  foreach ($candidate in $candidates) {
    if (-not (Test-Path -LiteralPath $candidate.Path -PathType Leaf)) { continue }
    try {
      $record = Read-JsonFile -Path $candidate.Path
    } catch {
      continue  # still being written
    }
    $secret = Get-Field -Object $record -Name $candidate.TokenField
    if (-not $secret) { continue }
    $port = Get-Field -Object $record -Name 'broker_port'
    return @{
      Token = [string]$secret
      RolloutId = [string](Get-Field -Object $record -Name 'rollout_id')
      BatchId = Get-Field -Object $record -Name 'batch_id'
      AttemptId = Get-Field -Object $record -Name 'attempt_id'
      BrokerVersion = Get-Field -Object $record -Name 'broker_version'
      Port = $(if ($port) { [int]$port } else { $DefaultPort })
      Listen = $candidate.Listen
      Source = $candidate.Source
    }
  }
  return $null
}

function Stop-EarlierBroker {
  # A broker this boot already started (the task was restarted): stop its process tree.
  if (-not (Test-Path -LiteralPath $ProcessPath -PathType Leaf)) { return }
  try {
    $earlier = Read-JsonFile -Path $ProcessPath
    $processId = [int](Get-Field -Object $earlier -Name 'process_id')
    $startedAt = [string](Get-Field -Object $earlier -Name 'process_started_at')
    $alive = Get-Process -Id $processId -ErrorAction SilentlyContinue
    if ($null -ne $alive -and $alive.StartTime.ToUniversalTime().ToString('o') -eq $startedAt) {
      Write-Log "stopping the broker process tree $processId of an earlier start"
      Stop-ProcessTree -ProcessId $processId
    }
  } catch {
    Write-Log "cannot read the earlier broker process record: $($_.Exception.Message)"
  }
  Remove-Item -Force -LiteralPath $ProcessPath -ErrorAction SilentlyContinue
}

# --- -Report: the aws readiness.ps1 -----------------------------------------------------------

if ($Report) {
  $statusArguments = @()
  if (Test-Path -LiteralPath $StatusPath -PathType Leaf) { $statusArguments = @('--status', $StatusPath) }
  $result = Invoke-Broker -ArgumentList (@('readiness-report', '--readiness', $ReadinessPath, '--wait-s', "$ReportWaitS") + $statusArguments) -TimeoutS ($ReportWaitS + 60)
  Write-Output $result.StdOut.Trim()
  exit $result.ExitCode
}

function Reset-RuntimeDirectory {
  # The broker starts on an empty runtime directory; files of a killed AutoCAD may stay locked
  # for a moment, so the removal is retried (bounded).
  for ($attempt = 1; $attempt -le 5; $attempt++) {
    try {
      if (Test-Path -LiteralPath $RuntimeDir) { Remove-Item -Recurse -Force -LiteralPath $RuntimeDir }
      break
    } catch {
      if ($attempt -eq 5) { throw }
      Start-Sleep -Seconds 2
    }
  }
  New-Item -ItemType Directory -Force -Path $RuntimeDir | Out-Null
}

# --- start ------------------------------------------------------------------------------------

function Start-Main {
  # Sets $script:ExitCode; returns early on a bounded failure (the finally block still runs).
  $broker = $null
  $script:ExitCode = 1
  try {
    New-Item -ItemType Directory -Force -Path $StateDir, $LogDir | Out-Null
    Remove-Item -Force -LiteralPath $ReadinessPath, $BrokerReadyPath -ErrorAction SilentlyContinue
    Write-Status -Phase 'starting'
    Stop-EarlierBroker
    Reset-RuntimeDirectory
    if (-not (Test-Path -LiteralPath $Python -PathType Leaf)) { throw "the broker venv is missing: $Python" }
    if (-not (Test-Path -LiteralPath $Template -PathType Leaf)) { throw "the template drawing is missing: $Template" }

    # 2. the deployment must be exactly what the manifest lists.
    Write-Status -Phase 'verifying-manifest'
    $verify = Invoke-Broker -ArgumentList @('manifest', 'verify', '--manifest', $ManifestPath, '--root', $InstallRoot) -TimeoutS 600
    $check = ConvertFrom-JsonLine -Text $verify.StdOut
    if ($verify.ExitCode -ne 0 -or $null -eq $check -or -not (Get-Field -Object $check -Name 'ok')) {
      $why = @(Get-Field -Object $check -Name 'problems') -join '; '
      Write-Status -Phase 'manifest-failed' -ErrorMessage "the deployment does not match its manifest: $why" -ExitCode 5
      $script:ExitCode = 5
      return
    }
    $manifestSha256 = [string](Get-Field -Object $check -Name 'manifest_sha256')
    $deploymentId = [string](Get-Field -Object $check -Name 'deployment_id')
    $brokerVersion = [string](Get-Field -Object $check -Name 'broker_version')
    $brokerSha256 = [string](Get-Field -Object $check -Name 'broker_sha256')
    $driverVersion = [string](Get-Field -Object $check -Name 'input_driver_version')

    # 3. the protected arm record of this rollout (the only source of the token).
    Write-Status -Phase 'waiting-for-arm'
    $deadline = (Get-Date).AddSeconds($ArmTimeoutS)
    $arm = Read-ArmRecord
    while ($null -eq $arm) {
      if ((Get-Date) -gt $deadline) {
        Write-Status -Phase 'arm-timeout' -ErrorMessage "no arm record within $ArmTimeoutS s" -ExitCode 3
        $script:ExitCode = 3
        return
      }
      Start-Sleep -Seconds 1
      $arm = Read-ArmRecord
    }
    $listen = $(if ($ListenAddress -eq 'auto') { $arm.Listen } else { $ListenAddress })
    Write-Log ('armed by {0} for rollout {1}, port {2}' -f $arm.Source, $arm.RolloutId, $arm.Port)
    if ($arm.BrokerVersion -and $arm.BrokerVersion -ne $brokerVersion) {
      Write-Log ('the rollout expects {0}; this image is {1} (admission will refuse it)' -f $arm.BrokerVersion, $brokerVersion)
    }

    # 4. real pointer prewarm on this session's WinSta0\Default, before the broker owns the desktop.
    Write-Status -Phase 'prewarm'
    $prewarm = $null
    for ($attempt = 1; $attempt -le $PrewarmAttempts; $attempt++) {
      $run = Invoke-Broker -ArgumentList @('prewarm', '--timeout-s', '2') -TimeoutS 120
      $prewarm = ConvertFrom-JsonLine -Text $run.StdOut
      if ($run.ExitCode -eq 0 -and $null -ne $prewarm -and (Get-Field -Object $prewarm -Name 'ok')) { break }
      Write-Log ('prewarm attempt {0} failed: {1}' -f $attempt, (@(Get-Field -Object $prewarm -Name 'problems') -join '; '))
      if ($attempt -lt $PrewarmAttempts) { Start-Sleep -Seconds 3 }
    }
    $prewarmOk = [bool](Get-Field -Object $prewarm -Name 'ok')

    # 5. the broker: token in its environment only.
    Write-Status -Phase 'starting-broker'
    $serve = @(
      '-m', 'autocad_bench_broker', 'serve', '--app', 'autocad',
      '--host', $listen, '--port', "$($arm.Port)",
      '--workdir', $RuntimeDir, '--template', $Template,
      '--broker-version', $brokerVersion, '--manifest', $ManifestPath,
      '--readiness', $ReadinessPath, '--ready-file', $BrokerReadyPath,
      '--startup-id', $script:StartupId, '--log-file', $BrokerLogPath
    )
    $info = New-StartInfo -ArgumentList $serve -Environment @{ $TokenVariable = $arm.Token }
    $broker = [System.Diagnostics.Process]::Start($info)
    $brokerStdout = $broker.StandardOutput.ReadToEndAsync()
    $brokerStderr = $broker.StandardError.ReadToEndAsync()
    Write-JsonFile -Path $ProcessPath -Value ([ordered]@{
        process_id = $broker.Id
        process_started_at = $broker.StartTime.ToUniversalTime().ToString('o')
        startup_id = $script:StartupId
      })

    # 6. listening, identity, readiness record.
    Write-Status -Phase 'waiting-for-broker'
    $deadline = (Get-Date).AddSeconds($ReadyTimeoutS)
    $ready = $null
    while ($null -eq $ready) {
      if ($broker.HasExited) { throw ('the broker exited with {0} before listening: {1}' -f $broker.ExitCode, $brokerStderr.Result.Trim()) }
      if ((Get-Date) -gt $deadline) {
        Stop-ProcessTree -ProcessId $broker.Id
        Write-Status -Phase 'broker-not-ready' -ErrorMessage "the broker did not listen within $ReadyTimeoutS s" -ExitCode 4
        $script:ExitCode = 4
        return
      }
      Start-Sleep -Milliseconds 500
      if (Test-Path -LiteralPath $BrokerReadyPath -PathType Leaf) {
        try { $ready = Read-JsonFile -Path $BrokerReadyPath } catch { $ready = $null }
      }
    }
    $headers = @{ Authorization = 'Bearer ' + $arm.Token }
    $health = Invoke-RestMethod -Uri ('http://127.0.0.1:{0}/health' -f $arm.Port) -Headers $headers -TimeoutSec 30 -UseBasicParsing
    $brokerPid = [int](Get-Field -Object $health -Name 'pid')
    $sessionId = [int](Get-Field -Object $health -Name 'interactive_session_id')
    $problems = New-Object System.Collections.Generic.List[string]
    if ((Get-Field -Object $health -Name 'startup_id') -ne $script:StartupId) { $problems.Add('/health reports another startup id') }
    if ([int](Get-Field -Object $ready -Name 'pid') -ne $brokerPid) { $problems.Add('the ready file and /health name different processes') }
    $osSession = (Get-Process -Id $brokerPid).SessionId
    if ($osSession -ne $sessionId) { $problems.Add("the broker process is in session $osSession, /health says $sessionId") }
    if ($sessionId -eq 0) { $problems.Add('the broker runs in session 0') }
    $consoleSession = Get-Field -Object $prewarm -Name 'console_session_id'
    if ($null -ne $consoleSession -and [int]$consoleSession -ne $sessionId) {
      $problems.Add("the broker is in session $sessionId, the console session is $consoleSession")
    }
    if ($env:USERNAME -ne $ConsoleUser) { $problems.Add("the task runs as $env:USERNAME, not $ConsoleUser") }
    if ((Get-Field -Object $health -Name 'manifest_sha256') -ne $manifestSha256) { $problems.Add('/health reports another manifest checksum') }
    $healthDriver = [string](Get-Field -Object $health -Name 'input_driver_version')
    if (-not $healthDriver.Contains("pyautogui/$driverVersion")) { $problems.Add("the broker's input driver is $healthDriver, the manifest says pyautogui $driverVersion") }
    foreach ($problem in $problems) { Write-Log "readiness problem: $problem" }

    $record = [ordered]@{
      format = 'autocad-bench-readiness/1'
      rollout_id = $arm.RolloutId
      batch_id = $arm.BatchId
      attempt_id = $arm.AttemptId
      boot_id = Get-Field -Object $health -Name 'boot_id'
      booted_at = (Get-BootTime).ToString('o')
      startup_id = $script:StartupId
      pid = $brokerPid
      ready_at = (Get-Date).ToUniversalTime().ToString('o')
      interactive_session_id = $sessionId
      console_session_id = $consoleSession
      console_user = $env:USERNAME
      desktop_width = Get-Field -Object $health -Name 'desktop_width'
      desktop_height = Get-Field -Object $health -Name 'desktop_height'
      window_station = Get-Field -Object $prewarm -Name 'window_station'
      desktop = Get-Field -Object $prewarm -Name 'desktop'
      broker_version = Get-Field -Object $health -Name 'broker_version'
      input_driver_version = $healthDriver
      manifest_sha256 = $manifestSha256
      deployment_id = $deploymentId
      broker_sha256 = $brokerSha256
      broker_port = $arm.Port
      prewarm_ok = $prewarmOk
      prewarm = $prewarm
      manifest_verified = $true
      problems = $problems.ToArray()
    }
    Write-JsonFile -Path $ReadinessPath -Value $record
    Write-Status -Phase 'ready'

    # 7. the task lives as long as the broker.
    $broker.WaitForExit()
    $tail = ($brokerStdout.Result + $brokerStderr.Result).Trim()
    if ($tail) { Write-Log "broker output: $tail" }
    $brokerExit = $broker.ExitCode
    $script:ExitCode = $(if ($brokerExit -eq 0) { 0 } else { 6 })
    Write-Status -Phase 'broker-exited' -ErrorMessage $(if ($brokerExit -ne 0) { "the broker exited with $brokerExit" } else { $null }) -ExitCode $script:ExitCode
  } catch {
    Write-Status -Phase 'failed' -ErrorMessage $_.Exception.Message -ExitCode 1
    if ($null -ne $broker -and -not $broker.HasExited) { Stop-ProcessTree -ProcessId $broker.Id }
    $script:ExitCode = 1
  } finally {
    # A record whose broker is gone is no longer evidence of anything.
    if (Test-Path -LiteralPath $ReadinessPath -PathType Leaf) {
      if ($null -eq $broker -or $broker.HasExited) { Remove-Item -Force -LiteralPath $ReadinessPath -ErrorAction SilentlyContinue }
    }
  }
}

$script:StartupId = [guid]::NewGuid().ToString('N')
$script:ExitCode = 1
Start-Main | Out-Null
exit $script:ExitCode
