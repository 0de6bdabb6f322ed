#Requires -Version 5.1
#Requires -RunAsAdministrator
<#
.SYNOPSIS
  Install the autocad-bench broker into a Windows + AutoCAD image: a Python venv with the
  broker wheel, the deployment manifest, and the scheduled task that starts the broker at log
  on of the autologon console user.

.DESCRIPTION
  Run once on the image builder (elevated), after Windows, AutoCAD 2019, Python 3.11 and the
  console autologon are set up (docs/windows-image.md). It is idempotent: running it again with
  the same inputs leaves the same installation, the same deployment id and the same manifest
  checksum; changed inputs produce a new deployment id.

  Steps:
    1. stops the AutoCADBenchBroker task and a broker it started;
    2. creates <InstallRoot> (bin, wheels, venv, template.dwg) and <DataRoot> (ACL: SYSTEM and
       Administrators only, inherited by manifest.json, secret\, state\, runtime\, logs\);
    3. copies the wheels, Start-AutocadBenchBroker.ps1 (to bin\) and the template drawing, and
       generates bin\readiness.ps1 (the aws backend's readiness command);
    4. creates the venv with -PythonExe (recreated when it was made by another interpreter);
       unless the installation still verifies against its existing manifest, installs
       autocad-bench and autocad-bench-broker with their dependencies from -WheelDirectory
       (only from there with -Offline) and force-reinstalls exactly the two given wheels;
       runs pip check;
    5. writes <DataRoot>\manifest.json with autocad-bench-broker manifest write: deployment id
       (GUID), broker wheel SHA-256, PyAutoGUI version and installed-files digest (and its
       archive's SHA-256 when -WheelDirectory holds it), the image's -BrokerVersion label, and
       every deployed file with its SHA-256; an unchanged installation keeps its manifest byte
       for byte (-NewDeployment forces a new one); then verifies it;
    6. registers the scheduled task: trigger at log on of -ConsoleUser, principal -ConsoleUser
       with LogonType Interactive (runs in the user's console session, never session 0) and
       RunLevel Highest, no execution time limit, one instance; its action runs
       Start-AutocadBenchBroker.ps1, whose command line holds paths only (the token is read
       from the protected arm record at each boot);
    7. optionally opens the broker port in Windows Firewall (-FirewallRemoteAddress);
    8. removes per-rollout state (arm records, readiness, runtime, logs) so the image holds none, and
       warns when the console autologon is not configured for -ConsoleUser.

  It prints one object: deployment_id, manifest, manifest_sha256, broker_sha256, task.

  This script runs only on Windows. The Linux test suite checks it as text only; the windows
  live gate (docs/windows-image.md, "What cannot be tested here") is what runs it.

.PARAMETER WheelDirectory
  Directory holding exactly one autocad_bench_broker-*.whl and one autocad_bench-*.whl, plus
  (for -Offline) every dependency as a wheel for this Python (pip wheel on a Windows machine).

.PARAMETER BrokerVersion
  The image contract label, e.g. windows-autocad-2019-v11. /health reports it; the aws AMI tag
  AutoCADBenchBrokerVersion and the local-hyperv free mark must carry the same label.

.PARAMETER TemplateDrawing
  The AutoCAD drawing every reset restores (.dwg); copied to <InstallRoot>\template.dwg.

.PARAMETER PythonExe
  The Python 3.11+ interpreter the venv is made from. Default C:\Program Files\Python311\python.exe.

.PARAMETER ConsoleUser
  The autologon user whose interactive console session runs the broker. Default Administrator.

.PARAMETER InstallRoot
  Default C:\Program Files\AutoCADBench (the aws backend runs <InstallRoot>\bin\readiness.ps1
  at exactly this default path).

.PARAMETER DataRoot
  Default C:\ProgramData\AutoCADBench (both backends use exactly this default path).

.PARAMETER DefaultPort
  Broker port when the arm record names none (local-hyperv guest_broker_port). Default 8765.

.PARAMETER TaskName
  Scheduled task name. Default AutoCADBenchBroker.

.PARAMETER FirewallRemoteAddress
  When given, an inbound rule allows TCP -DefaultPort from these addresses only (local-hyperv:
  the Hyper-V host or the controllers). Not needed for aws (SSM port forwarding is local).

.PARAMETER Offline
  Install only from -WheelDirectory (pip --no-index).

.PARAMETER NewDeployment
  Write a new manifest (new deployment id) even if nothing changed.

.EXAMPLE
  .\Install-AutocadBenchBroker.ps1 -WheelDirectory C:\build\wheelhouse -BrokerVersion windows-autocad-2019-v11 `
      -TemplateDrawing C:\build\template.dwg -Offline
#>
[CmdletBinding()]
param(
  [Parameter(Mandatory = $true)][string]$WheelDirectory,
  [Parameter(Mandatory = $true)][ValidatePattern('^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$')][string]$BrokerVersion,
  [Parameter(Mandatory = $true)][string]$TemplateDrawing,
  [string]$PythonExe = 'C:\Program Files\Python311\python.exe',
  [ValidatePattern('^[^\\/"]+$')][string]$ConsoleUser = 'Administrator',
  [string]$InstallRoot = 'C:\Program Files\AutoCADBench',
  [string]$DataRoot = 'C:\ProgramData\AutoCADBench',
  [ValidateRange(1, 65535)][int]$DefaultPort = 8765,
  [ValidatePattern('^[A-Za-z0-9._-]+$')][string]$TaskName = 'AutoCADBenchBroker',
  [string[]]$FirewallRemoteAddress = @(),
  [switch]$Offline,
  [switch]$NewDeployment
)
Set-StrictMode -Version Latest
$ErrorActionPreference = 'Stop'

$InstallRoot = [System.IO.Path]::GetFullPath($InstallRoot).TrimEnd('\')
$DataRoot = [System.IO.Path]::GetFullPath($DataRoot).TrimEnd('\')
$WheelDirectory = [System.IO.Path]::GetFullPath($WheelDirectory).TrimEnd('\')
$BinDir = Join-Path $InstallRoot 'bin'
$WheelsDir = Join-Path $InstallRoot 'wheels'
$VenvDir = Join-Path $InstallRoot 'venv'
$VenvPython = Join-Path $VenvDir 'Scripts\python.exe'
$ManifestPath = Join-Path $DataRoot 'manifest.json'
$StartScript = Join-Path $BinDir 'Start-AutocadBenchBroker.ps1'
$ReadinessScript = Join-Path $BinDir 'readiness.ps1'
$FirewallRuleName = 'AutoCADBench broker'

function Get-Field {
  # Property of a parsed JSON object, or $null when absent (StrictMode forbids a plain access).
  param([AllowNull()][object]$Object, [Parameter(Mandatory = $true)][string]$Name)
  if ($null -eq $Object) { return $null }
  $property = $Object.PSObject.Properties[$Name]
  if ($null -eq $property) { return $null }
  return $property.Value
}

function ConvertTo-ArgumentString {
  # One Windows command line from separate arguments (C runtime quoting rules).
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

function Invoke-Checked {
  # Run a program to completion within TimeoutS with its output captured (stderr never turns
  # into a terminating PowerShell error); throw unless it exits 0. Returns its standard output.
  param(
    [Parameter(Mandatory = $true)][string]$FilePath,
    [Parameter(Mandatory = $true)][string[]]$ArgumentList,
    [Parameter(Mandatory = $true)][int]$TimeoutS,
    [hashtable]$Environment = @{},
    [switch]$AllowFailure
  )
  $info = New-Object System.Diagnostics.ProcessStartInfo
  $info.FileName = $FilePath
  $info.Arguments = ConvertTo-ArgumentString -Arguments $ArgumentList
  $info.UseShellExecute = $false
  $info.CreateNoWindow = $true
  $info.RedirectStandardOutput = $true
  $info.RedirectStandardError = $true
  foreach ($name in $Environment.Keys) { $info.EnvironmentVariables[$name] = [string]$Environment[$name] }
  $process = [System.Diagnostics.Process]::Start($info)
  $stdout = $process.StandardOutput.ReadToEndAsync()
  $stderr = $process.StandardError.ReadToEndAsync()
  if (-not $process.WaitForExit($TimeoutS * 1000)) {
    Stop-ProcessTree -ProcessId $process.Id
    throw ('{0} {1} did not finish within {2} s' -f [System.IO.Path]::GetFileName($FilePath), $ArgumentList[0], $TimeoutS)
  }
  $process.WaitForExit()
  if ($process.ExitCode -ne 0 -and -not $AllowFailure) {
    throw ('{0} {1} failed with exit code {2}: {3}' -f [System.IO.Path]::GetFileName($FilePath), ($ArgumentList -join ' '), $process.ExitCode, ($stderr.Result + $stdout.Result).Trim())
  }
  return [pscustomobject]@{ ExitCode = $process.ExitCode; StdOut = $stdout.Result; StdErr = $stderr.Result }
}

function Stop-ProcessTree {
  param([Parameter(Mandatory = $true)][int]$ProcessId)
  $taskkill = Join-Path $env:SystemRoot 'System32\taskkill.exe'
  $kill = Start-Process -FilePath $taskkill -ArgumentList @('/PID', "$ProcessId", '/T', '/F') -WindowStyle Hidden -PassThru
  [void]$kill.WaitForExit(15000)
}

function ConvertFrom-JsonLine {
  param([AllowNull()][string]$Text)
  if (-not $Text) { return $null }
  $lines = @($Text -split "`r?`n" | Where-Object { $_.Trim().StartsWith('{') })
  if ($lines.Count -eq 0) { return $null }
  return (ConvertFrom-Json -InputObject $lines[$lines.Count - 1])
}

function Set-AdministratorsOnlyAcl {
  # Protected ACL: full control for SYSTEM (S-1-5-18) and Administrators (S-1-5-32-544) only,
  # by SID so that it works on every display language; directories pass it on to children.
  param([Parameter(Mandatory = $true)][string]$Path, [switch]$Directory)
  if ($Directory) {
    $acl = New-Object System.Security.AccessControl.DirectorySecurity
    $inheritance = [System.Security.AccessControl.InheritanceFlags]'ContainerInherit, ObjectInherit'
  } else {
    $acl = New-Object System.Security.AccessControl.FileSecurity
    $inheritance = [System.Security.AccessControl.InheritanceFlags]::None
  }
  $acl.SetAccessRuleProtection($true, $false)
  foreach ($sid in @('S-1-5-18', 'S-1-5-32-544')) {
    $who = New-Object System.Security.Principal.SecurityIdentifier($sid)
    $rule = New-Object System.Security.AccessControl.FileSystemAccessRule(
      $who, [System.Security.AccessControl.FileSystemRights]::FullControl, $inheritance,
      [System.Security.AccessControl.PropagationFlags]::None, [System.Security.AccessControl.AccessControlType]::Allow)
    $acl.AddAccessRule($rule)
  }
  Set-Acl -LiteralPath $Path -AclObject $acl
}

function Get-SingleFile {
  param([Parameter(Mandatory = $true)][string]$Directory, [Parameter(Mandatory = $true)][string]$Filter, [Parameter(Mandatory = $true)][string]$What)
  $found = @(Get-ChildItem -LiteralPath $Directory -File -Filter $Filter)
  if ($found.Count -ne 1) { throw ('{0}: expected exactly one {1} in {2}, found {3}' -f $What, $Filter, $Directory, $found.Count) }
  return $found[0]
}

function Write-Step {
  param([Parameter(Mandatory = $true)][string]$Message)
  Write-Host ('[autocad-bench] {0}' -f $Message)
}

# --- 0. inputs -------------------------------------------------------------------------------

if (-not (Test-Path -LiteralPath $WheelDirectory -PathType Container)) { throw "-WheelDirectory $WheelDirectory is not a directory" }
if (-not (Test-Path -LiteralPath $TemplateDrawing -PathType Leaf) -or [System.IO.Path]::GetExtension($TemplateDrawing) -ne '.dwg') {
  throw "-TemplateDrawing $TemplateDrawing is not a .dwg file"
}
if (-not (Test-Path -LiteralPath $PythonExe -PathType Leaf)) { throw "-PythonExe $PythonExe does not exist" }
$sourceStart = Join-Path $PSScriptRoot 'Start-AutocadBenchBroker.ps1'
if (-not (Test-Path -LiteralPath $sourceStart -PathType Leaf)) { throw "Start-AutocadBenchBroker.ps1 must lie beside this script" }
$brokerWheel = Get-SingleFile -Directory $WheelDirectory -Filter 'autocad_bench_broker-*.whl' -What 'broker wheel'
$coreWheel = Get-SingleFile -Directory $WheelDirectory -Filter 'autocad_bench-*.whl' -What 'core wheel'
$driverArchives = @(Get-ChildItem -LiteralPath $WheelDirectory -File | Where-Object { $_.Name -match '^pyautogui-[0-9][^-]*(-.*\.whl|\.tar\.gz|\.zip)$' })
$pythonCheck = Invoke-Checked -FilePath $PythonExe -ArgumentList @('-c', 'import sys; print(int(sys.version_info >= (3, 11)))') -TimeoutS 120
if ($pythonCheck.StdOut.Trim() -ne '1') { throw "-PythonExe must be Python 3.11 or later" }

# --- 1. stop what runs -----------------------------------------------------------------------

$existingTask = Get-ScheduledTask -TaskName $TaskName -ErrorAction SilentlyContinue
if ($null -ne $existingTask) {
  Write-Step "stopping the scheduled task $TaskName"
  Stop-ScheduledTask -TaskName $TaskName
}
$processRecord = Join-Path $DataRoot 'state\broker-process.json'
if (Test-Path -LiteralPath $processRecord -PathType Leaf) {
  $earlier = ConvertFrom-Json -InputObject ([System.IO.File]::ReadAllText($processRecord))
  $earlierId = Get-Field -Object $earlier -Name 'process_id'
  $alive = $(if ($null -ne $earlierId) { Get-Process -Id ([int]$earlierId) -ErrorAction SilentlyContinue } else { $null })
  if ($null -ne $alive -and $alive.StartTime.ToUniversalTime().ToString('o') -eq [string](Get-Field -Object $earlier -Name 'process_started_at')) {
    Write-Step "stopping the running broker process tree $earlierId"
    Stop-ProcessTree -ProcessId ([int]$earlierId)
  }
}

# --- 2. directories and ACLs -----------------------------------------------------------------

Write-Step "preparing $InstallRoot and $DataRoot"
New-Item -ItemType Directory -Force -Path $InstallRoot, $BinDir, $WheelsDir, $DataRoot | Out-Null
Set-AdministratorsOnlyAcl -Path $DataRoot -Directory
foreach ($name in @('secret', 'state', 'runtime', 'logs')) {
  New-Item -ItemType Directory -Force -Path (Join-Path $DataRoot $name) | Out-Null
}

# --- 3. files --------------------------------------------------------------------------------

Get-ChildItem -LiteralPath $WheelsDir -File -Filter 'autocad_bench*.whl' |
  Where-Object { $_.Name -ne $brokerWheel.Name -and $_.Name -ne $coreWheel.Name } |
  Remove-Item -Force
$installedBroker = Join-Path $WheelsDir $brokerWheel.Name
$installedCore = Join-Path $WheelsDir $coreWheel.Name
Copy-Item -Force -LiteralPath $brokerWheel.FullName -Destination $installedBroker
Copy-Item -Force -LiteralPath $coreWheel.FullName -Destination $installedCore
Copy-Item -Force -LiteralPath $sourceStart -Destination $StartScript
Copy-Item -Force -LiteralPath $TemplateDrawing -Destination (Join-Path $InstallRoot 'template.dwg')
$readinessText = @(
  '# Generated by Install-AutocadBenchBroker.ps1: the aws backend runs this over SSM and reads',
  '# the one JSON line it prints (current boot and readiness record).',
  'Set-StrictMode -Version Latest',
  "`$ErrorActionPreference = 'Stop'",
  ("& '{0}' -Report -InstallRoot '{1}' -DataRoot '{2}'" -f $StartScript.Replace("'", "''"), $InstallRoot.Replace("'", "''"), $DataRoot.Replace("'", "''")),
  'exit $LASTEXITCODE'
) -join "`r`n"
[System.IO.File]::WriteAllText($ReadinessScript, $readinessText + "`r`n", (New-Object System.Text.UTF8Encoding($false)))

# --- 4. venv ---------------------------------------------------------------------------------

$pythonHome = Split-Path -Parent ([System.IO.Path]::GetFullPath($PythonExe))
$venvConfig = Join-Path $VenvDir 'pyvenv.cfg'
if (Test-Path -LiteralPath $venvConfig -PathType Leaf) {
  $homeLine = @(Get-Content -LiteralPath $venvConfig | Where-Object { $_ -match '^\s*home\s*=' })
  $madeBy = $(if ($homeLine.Count -gt 0) { ($homeLine[0] -split '=', 2)[1].Trim().TrimEnd('\') } else { '' })
  if ($madeBy -ne $pythonHome.TrimEnd('\')) {
    Write-Step "recreating the venv (made by $madeBy, not $pythonHome)"
    Remove-Item -Recurse -Force -LiteralPath $VenvDir
  }
}
if (-not (Test-Path -LiteralPath $VenvPython -PathType Leaf)) {
  Write-Step "creating the venv $VenvDir"
  Invoke-Checked -FilePath $PythonExe -ArgumentList @('-m', 'venv', $VenvDir) -TimeoutS 600 | Out-Null
}
# An installation that still verifies against its manifest (same wheels, scripts, template and
# venv files) is left alone: reinstalling would regenerate pip's console-script launchers, whose
# bytes differ on every install, and so change the deployment for nothing.
$upToDate = $false
if (-not $NewDeployment -and (Test-Path -LiteralPath $ManifestPath -PathType Leaf)) {
  $previous = Invoke-Checked -FilePath $VenvPython -ArgumentList @('-m', 'autocad_bench_broker', 'manifest', 'verify', '--manifest', $ManifestPath, '--root', $InstallRoot) -TimeoutS 600 -AllowFailure
  $upToDate = ($previous.ExitCode -eq 0)
}
if ($upToDate) {
  Write-Step 'the installation still matches its manifest; pip is not run'
} else {
  $pip = @('-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '--no-warn-script-location')
  $source = @('--find-links', $WheelDirectory)
  if ($Offline) { $source = @('--no-index') + $source }
  Write-Step 'installing autocad-bench-broker and its dependencies'
  # A fixed SOURCE_DATE_EPOCH makes pip's console-script launchers reproducible too.
  $reproducible = @{ SOURCE_DATE_EPOCH = '315532800' }
  Invoke-Checked -FilePath $VenvPython -ArgumentList ($pip + $source + @($installedCore, $installedBroker)) -TimeoutS 1800 -Environment $reproducible | Out-Null
  Invoke-Checked -FilePath $VenvPython -ArgumentList ($pip + @('--no-deps', '--force-reinstall', $installedCore, $installedBroker)) -TimeoutS 1800 -Environment $reproducible | Out-Null
}
Invoke-Checked -FilePath $VenvPython -ArgumentList @('-m', 'pip', 'check', '--disable-pip-version-check') -TimeoutS 600 | Out-Null

# --- 5. manifest -----------------------------------------------------------------------------

Write-Step "writing the deployment manifest $ManifestPath"
$write = @(
  '-m', 'autocad_bench_broker', 'manifest', 'write',
  '--root', $InstallRoot, '--output', $ManifestPath, '--broker-version', $BrokerVersion,
  '--broker-wheel', $installedBroker,
  '--file', $installedCore, '--file', $StartScript, '--file', $ReadinessScript,
  '--file', (Join-Path $InstallRoot 'template.dwg'), '--file', $venvConfig,
  '--distribution', 'autocad-bench-broker', '--distribution', 'autocad-bench', '--distribution', 'pyautogui'
)
if ($driverArchives.Count -eq 1) { $write += @('--input-driver-archive', $driverArchives[0].FullName) }
if ($NewDeployment) { $write += @('--new-deployment') }
$written = ConvertFrom-JsonLine -Text (Invoke-Checked -FilePath $VenvPython -ArgumentList $write -TimeoutS 600).StdOut
if ($null -eq $written) { throw 'manifest write printed no result' }
Set-AdministratorsOnlyAcl -Path $ManifestPath
$verify = Invoke-Checked -FilePath $VenvPython -ArgumentList @('-m', 'autocad_bench_broker', 'manifest', 'verify', '--manifest', $ManifestPath) -TimeoutS 600 -AllowFailure
$check = ConvertFrom-JsonLine -Text $verify.StdOut
if ($verify.ExitCode -ne 0 -or -not (Get-Field -Object $check -Name 'ok')) {
  throw ('the new installation does not verify against its manifest: {0}' -f (@(Get-Field -Object $check -Name 'problems') -join '; '))
}

# --- 6. scheduled task -----------------------------------------------------------------------

Write-Step "registering the scheduled task $TaskName (at log on of $ConsoleUser, interactive, highest)"
$powershell = Join-Path $env:SystemRoot 'System32\WindowsPowerShell\v1.0\powershell.exe'
$taskArguments = '-NoProfile -NonInteractive -ExecutionPolicy Bypass -WindowStyle Hidden -File "{0}" -InstallRoot "{1}" -DataRoot "{2}" -DefaultPort {3} -ConsoleUser "{4}"' -f $StartScript, $InstallRoot, $DataRoot, $DefaultPort, $ConsoleUser
$action = New-ScheduledTaskAction -Execute $powershell -Argument $taskArguments -WorkingDirectory $InstallRoot
$trigger = New-ScheduledTaskTrigger -AtLogOn -User $ConsoleUser
$principal = New-ScheduledTaskPrincipal -UserId $ConsoleUser -LogonType Interactive -RunLevel Highest
$settings = New-ScheduledTaskSettingsSet -ExecutionTimeLimit ([TimeSpan]::Zero) -MultipleInstances IgnoreNew `
  -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries -DontStopOnIdleEnd -Priority 4
Register-ScheduledTask -TaskName $TaskName -Action $action -Trigger $trigger -Principal $principal -Settings $settings `
  -Description 'autocad-bench broker: starts the broker in the console session and writes the readiness record' -Force | Out-Null
$registered = Get-ScheduledTask -TaskName $TaskName
if ([string]$registered.Principal.LogonType -ne 'Interactive') { throw "the task $TaskName is not interactive" }

# --- 7. firewall -----------------------------------------------------------------------------

Get-NetFirewallRule -DisplayName $FirewallRuleName -ErrorAction SilentlyContinue | Remove-NetFirewallRule
if ($FirewallRemoteAddress.Count -gt 0) {
  Write-Step ('allowing TCP {0} from {1}' -f $DefaultPort, ($FirewallRemoteAddress -join ', '))
  New-NetFirewallRule -DisplayName $FirewallRuleName -Direction Inbound -Protocol TCP -LocalPort $DefaultPort `
    -RemoteAddress $FirewallRemoteAddress -Action Allow -Profile Any | Out-Null
}

# --- 8. no per-rollout state in the image; autologon check -----------------------------------

Remove-Item -Force -ErrorAction SilentlyContinue -LiteralPath (Join-Path $DataRoot 'secret\arm.json'), (Join-Path $DataRoot 'rollout.json')
Get-ChildItem -LiteralPath (Join-Path $DataRoot 'state') -File | Remove-Item -Force
Get-ChildItem -LiteralPath (Join-Path $DataRoot 'runtime') | Remove-Item -Recurse -Force
Get-ChildItem -LiteralPath (Join-Path $DataRoot 'logs') -File | Remove-Item -Force
$winlogon = Get-ItemProperty -Path 'HKLM:\SOFTWARE\Microsoft\Windows NT\CurrentVersion\Winlogon' -ErrorAction SilentlyContinue
if ([string](Get-Field -Object $winlogon -Name 'AutoAdminLogon') -ne '1' -or [string](Get-Field -Object $winlogon -Name 'DefaultUserName') -ne $ConsoleUser) {
  Write-Warning "the console autologon of $ConsoleUser is not configured (Winlogon AutoAdminLogon/DefaultUserName): the task only runs once $ConsoleUser logs on"
}

$manifestSha256 = (Get-FileHash -Algorithm SHA256 -LiteralPath $ManifestPath).Hash.ToLowerInvariant()
[pscustomobject]@{
  deployment_id = Get-Field -Object $written -Name 'deployment_id'
  unchanged = Get-Field -Object $written -Name 'unchanged'
  manifest = $ManifestPath
  manifest_sha256 = $manifestSha256
  broker_sha256 = Get-Field -Object $written -Name 'broker_sha256'
  broker_version = $BrokerVersion
  task = $TaskName
}
