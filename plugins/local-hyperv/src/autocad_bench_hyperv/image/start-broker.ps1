<#
.SYNOPSIS
  Image side of the local-hyperv backend: start the broker once the controller has armed this VM.

.DESCRIPTION
  Install in the golden image as a scheduled task that runs at log on of the autologon user
  (the console session), "Run only when user is logged on", with highest privileges:

    $action  = New-ScheduledTaskAction -Execute 'powershell.exe' -Argument `
      '-NoProfile -ExecutionPolicy Bypass -WindowStyle Hidden -File "C:\AutoCADBench\bin\start-broker.ps1"'
    $trigger = New-ScheduledTaskTrigger -AtLogOn -User 'Administrator'
    $principal = New-ScheduledTaskPrincipal -UserId 'Administrator' -LogonType Interactive -RunLevel Highest
    Register-ScheduledTask -TaskName 'AutoCADBenchBroker' -Action $action -Trigger $trigger -Principal $principal

  At every boot of a restored clone it:
    1. removes readiness files an earlier boot may have left;
    2. waits (bounded) for C:\ProgramData\AutoCADBench\secret\arm.json, which the controller
       writes by PowerShell Direct (Invoke-Command -VMName) with the per-rollout token;
    3. starts the broker in this interactive session with the token in its environment only;
    4. waits for the broker's ready file and asks its authenticated /health for its identity;
    5. writes C:\ProgramData\AutoCADBench\state\ready.json, the readiness record the controller
       reads back by PowerShell Direct and compares with /health.

  This script runs only on Windows and is covered by the `windows` live test, not by the
  Linux test suite.
#>
param(
  [int]$Port = 8765,
  [string]$Broker = 'C:\AutoCADBench\venv\Scripts\autocad-bench-broker.exe',
  [string]$Template = 'C:\AutoCADBench\template.dwg',
  [string]$Workdir = 'C:\AutoCADBench\runtime',
  [int]$ArmTimeoutS = 1800,
  [int]$ReadyTimeoutS = 300
)
$ErrorActionPreference = 'Stop'
$root = 'C:\ProgramData\AutoCADBench'
$arm = Join-Path $root 'secret\arm.json'
$state = Join-Path $root 'state'
$ready = Join-Path $state 'ready.json'
$brokerReady = Join-Path $state 'broker-ready.json'
New-Item -ItemType Directory -Force -Path $state | Out-Null
Remove-Item -Force -ErrorAction SilentlyContinue -Path $ready, $brokerReady

$deadline = (Get-Date).AddSeconds($ArmTimeoutS)
while (-not (Test-Path -LiteralPath $arm)) {
  if ((Get-Date) -gt $deadline) { exit 3 }
  Start-Sleep -Seconds 1
}
$record = Get-Content -Raw -LiteralPath $arm | ConvertFrom-Json

$env:AUTOCAD_BENCH_BROKER_TOKEN = $record.token
$arguments = @('serve', '--app', 'autocad', '--host', '0.0.0.0', '--port', "$Port", '--workdir', $Workdir,
               '--template', $Template, '--broker-version', $record.broker_version, '--ready-file', $brokerReady)
$process = Start-Process -FilePath $Broker -ArgumentList $arguments -PassThru -WindowStyle Hidden
Remove-Item -Path Env:AUTOCAD_BENCH_BROKER_TOKEN

$deadline = (Get-Date).AddSeconds($ReadyTimeoutS)
while (-not (Test-Path -LiteralPath $brokerReady)) {
  if ($process.HasExited -or (Get-Date) -gt $deadline) { exit 4 }
  Start-Sleep -Milliseconds 500
}
$headers = @{ Authorization = "Bearer $($record.token)" }
$health = Invoke-RestMethod -Uri "http://127.0.0.1:$Port/health" -Headers $headers -TimeoutSec 30
$os = Get-CimInstance -ClassName Win32_OperatingSystem
$readiness = [ordered]@{
  rollout_id = $record.rollout_id
  boot_id = $health.boot_id
  booted_at = $os.LastBootUpTime.ToUniversalTime().ToString('o')
  startup_id = $health.startup_id
  pid = $health.pid
  ready_at = (Get-Date).ToUniversalTime().ToString('o')
  interactive_session_id = (Get-Process -Id $health.pid).SessionId
  console_user = $env:USERNAME
  desktop_width = $health.desktop_width
  desktop_height = $health.desktop_height
  broker_version = $health.broker_version
  input_driver_version = $health.input_driver_version
  manifest_sha256 = $health.manifest_sha256
  broker_port = $Port
}
$tmp = "$ready.tmp"
[System.IO.File]::WriteAllText($tmp, ($readiness | ConvertTo-Json -Compress))
Move-Item -Force -Path $tmp -Destination $ready
