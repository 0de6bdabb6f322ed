"""``autocad-bench-broker``: run the broker HTTP server on one desktop.

Interface (kept stable: the local-xvfb backend starts exactly this command inside a private
Xvfb display and reads the ready file)::

    AUTOCAD_BENCH_BROKER_TOKEN=<token> autocad-bench-broker serve \\
        --app librecad --display :N --workdir DIR --template PATH \\
        --broker-version windows-autocad-2019-v11 \\
        [--host 127.0.0.1] [--port 0] [--ready-file PATH] [--manifest PATH] \\
        [--settle-window-s 1.5] [--settle-delay-s 0.1] [--settle-interval-s 0.1] \\
        [--max-actions 5000] [--reset-launches 2] [--png-compress-level 6] \\
        [--max-body-bytes 8388608] [--shutdown-timeout-s 30] \\
        [--readiness PATH] [--startup-id ID] [--log-file PATH]

(``python -m autocad_bench_broker serve ...`` is the same.)

- The bearer token is read **only** from ``AUTOCAD_BENCH_BROKER_TOKEN`` (never from argv,
  where other users could read it in the process list); the broker refuses to start without
  it, or when it is shorter than 16 characters or contains spaces or control characters.
- ``--app librecad`` needs ``--display :N`` (the X display to drive); ``--app autocad``
  runs only on Windows (the interactive console desktop; ``--display`` is not allowed).
- ``--workdir`` is the runtime directory: ``events.jsonl`` (the event log), ``app/`` (the
  application's private HOME), ``sessions/<id>/{attempt,frames,artifacts}``.
- ``--template`` is the drawing every reset restores; its suffix must be the application's
  format (``.dxf`` for LibreCAD, ``.dwg`` for AutoCAD), which is also the artifact's:
  ``attempt.dxf`` or ``attempt.dwg``.
- ``--port 0`` picks a free port. Once the server listens, the ready file is written
  atomically (temporary file + rename) as JSON ``{"url", "port", "pid", "startup_id"}``; it
  is removed again on shutdown. ``--manifest`` names the deployment manifest whose SHA-256
  ``/health`` reports (default: a digest of the broker package's own files).
- ``--settle-*`` bound the post-action stability poll: wait ``delay`` after the batch, grab
  every ``interval`` until two grabs are identical, give up after ``window`` (the batch is
  then answered with ``post_action_visual_stable=false``, never failed).
- ``--readiness`` names the image's current-boot readiness record; ``/health`` then adds its
  ``deployment_id``, ``startup_id`` (as ``readiness_startup_id``) and prewarm result.
  ``--startup-id`` replaces the random startup id (the Windows launcher draws it, gives it to
  the broker and writes it into the readiness record). ``--log-file`` appends the log there
  instead of stderr.

Deployment helpers of the Windows image (``docs/windows-image.md``)::

    autocad-bench-broker windows-scripts DIR     # copies the two image scripts shipped in this package
    autocad-bench-broker prewarm [--display :N] [--timeout-s 2]
    autocad-bench-broker manifest write --root DIR --output PATH --broker-version LABEL \\
        --broker-wheel PATH [--file PATH ...] [--distribution NAME ...] \\
        [--input-driver-archive PATH] [--deployment-id GUID] [--new-deployment]
    autocad-bench-broker manifest verify --manifest PATH [--root DIR]
    autocad-bench-broker readiness-report --readiness PATH [--wait-s 0] [--status PATH]

Each prints one JSON object on stdout. ``prewarm`` moves the real pointer to a target and back
through the input driver (exit 0 when it worked, 1 when not); ``manifest verify`` exits 1 when
a listed file or the input driver differs; see :mod:`autocad_bench_broker.readiness`.

SIGTERM or SIGINT shuts down gracefully, all within ``--shutdown-timeout-s``: stop
listening, let in-flight requests finish (2 s, at most a fifth of the budget), interrupt
``wait`` actions, kill the application's process tree, close the drivers (see
:meth:`~autocad_bench_broker.server.BrokerServer.stop` for how the budget is shared).

Exit status: 0 after a graceful shutdown, 2 for a usage or start-up problem (one
``error: ...`` line on stderr, no traceback), 1 if the server failed while running or the
shutdown overran its bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from autocad_bench.broker.protocol import DEFAULT_MAX_BODY_BYTES
from autocad_bench.infrastructure.models import BROKER_TOKEN_ENV
from autocad_bench.storage import atomic_write_bytes
from autocad_bench_broker.apps.base import ApplicationAdapter
from autocad_bench_broker.drivers.capture import MssCapture, ScreenCapture, StabilityPolicy
from autocad_bench_broker.drivers.input import InputDriver, PyAutoGUIDriver
from autocad_bench_broker.errors import BrokerError
from autocad_bench_broker.identity import IdentityError, display_number, interactive_session_id, manifest_sha256
from autocad_bench_broker.server import DEFAULT_MAX_ACTIONS, BrokerServer, BrokerSettings

log = logging.getLogger("autocad_bench_broker")

MIN_TOKEN_LENGTH = 16
APP_FORMATS = {"librecad": ".dxf", "autocad": ".dwg"}
"""Drawing format (template suffix and artifact suffix) of each application adapter."""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class StartupError(Exception):
    """A usage or environment problem detected before the server listens (exit 2)."""


@dataclass(frozen=True)
class ServeOptions:
    """The parsed ``serve`` command line (the token is not part of it)."""

    host: str
    port: int
    app: str
    display: str | None
    workdir: Path
    template: Path
    ready_file: Path | None
    broker_version: str
    manifest: Path | None
    settle_window_s: float
    settle_delay_s: float
    settle_interval_s: float
    max_actions: int
    reset_launches: int
    png_compress_level: int
    max_body_bytes: int
    shutdown_timeout_s: float
    readiness: Path | None = None
    startup_id: str | None = None


STARTUP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{7,127}$")


def read_token(environ: dict[str, str] | os._Environ[str]) -> str:
    """The bearer token from ``AUTOCAD_BENCH_BROKER_TOKEN``; raises :class:`StartupError`.

    The message names the variable and the rule broken, never the value.
    """
    token = environ.get(BROKER_TOKEN_ENV, "")
    if not token:
        raise StartupError(f"{BROKER_TOKEN_ENV} is not set; the broker needs a bearer token")
    if len(token) < MIN_TOKEN_LENGTH:
        raise StartupError(f"{BROKER_TOKEN_ENV} must be at least {MIN_TOKEN_LENGTH} characters")
    if not all("!" <= char <= "~" for char in token):
        raise StartupError(f"{BROKER_TOKEN_ENV} must be printable ASCII without spaces")
    return token


def write_ready_file(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` as JSON to ``path`` atomically and durably (readers never see a
    partial file); creates the parent directory. Raises ``OSError`` if the file system refuses."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, json.dumps(payload).encode("utf-8"))


def _remove_ready_file(path: Path, startup_id: str) -> None:
    # Only our own file: a successor broker may already have written its own.
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text(encoding="utf-8")).get("startup_id") == startup_id:
            path.unlink()


def _desktop(options: ServeOptions) -> tuple[InputDriver, ScreenCapture, ApplicationAdapter]:
    """Construct (without touching the display yet) the drivers and adapter of ``--app``."""
    if options.app == "librecad":
        from autocad_bench_broker.apps.librecad import LibreCADAdapter

        assert options.display is not None
        capture = MssCapture(options.display)
        driver = PyAutoGUIDriver(options.display)
        return driver, capture, LibreCADAdapter(options.display, options.workdir / "app", capture)
    if sys.platform != "win32":
        raise StartupError("--app autocad runs only on Windows")
    from autocad_bench_broker.apps.autocad import AutoCADAdapter

    capture = MssCapture(None)
    return PyAutoGUIDriver(None), capture, AutoCADAdapter(capture)


def _check(options: ServeOptions) -> None:
    if options.app == "librecad":
        if options.display is None:
            raise StartupError("--app librecad needs --display :N")
        try:
            display_number(options.display)
        except IdentityError as error:
            raise StartupError(f"--display: {error}") from None
    elif options.display is not None:
        raise StartupError("--display is only for --app librecad (AutoCAD uses the console desktop)")
    suffix = APP_FORMATS[options.app]
    if options.template.suffix.lower() != suffix:
        raise StartupError(f"--template must be a {suffix} drawing for --app {options.app}")
    if not options.template.is_file():
        raise StartupError("--template does not name a readable file")
    if options.settle_window_s <= 0 or options.settle_delay_s < 0 or options.settle_interval_s < 0:
        raise StartupError("--settle-window-s must be > 0, --settle-delay-s and --settle-interval-s >= 0")
    if options.shutdown_timeout_s <= 0:
        raise StartupError("--shutdown-timeout-s must be > 0")
    if options.startup_id is not None and not STARTUP_ID.match(options.startup_id):
        raise StartupError("--startup-id must be 8-128 characters of letters, digits, '.', '_' or '-'")


async def serve(options: ServeOptions, token: str) -> int:
    """Run the broker until SIGTERM/SIGINT; returns the exit status (see the module docstring).

    Raises :class:`StartupError` for problems found before the server listens.
    """
    _check(options)
    try:
        options.workdir.mkdir(parents=True, exist_ok=True)
        session_id = interactive_session_id(options.display)
        digest = manifest_sha256(options.manifest)
    except IdentityError as error:
        raise StartupError(str(error)) from None
    except OSError as error:
        raise StartupError(f"--workdir cannot be created: {error.strerror}") from None
    settings = BrokerSettings(
        workdir=options.workdir,
        template=options.template.resolve(),
        broker_version=options.broker_version,
        manifest_sha256=digest,
        interactive_session_id=session_id,
        artifact_name=f"attempt{APP_FORMATS[options.app]}",
        max_body_bytes=options.max_body_bytes,
        max_actions=options.max_actions,
        stability=StabilityPolicy(
            window_s=options.settle_window_s,
            interval_s=options.settle_interval_s,
            settle_s=options.settle_delay_s,
        ),
        reset_launches=options.reset_launches,
        png_compress_level=options.png_compress_level,
        shutdown_timeout_s=options.shutdown_timeout_s,
        readiness=options.readiness,
    )
    driver, capture, adapter = _desktop(options)
    try:
        server = BrokerServer(settings, token, driver, capture, adapter, startup_id=options.startup_id)
        url = await server.start(options.host, options.port)
    except (BrokerError, ValueError, OSError) as error:
        with contextlib.suppress(Exception):
            adapter.close()
            driver.close()
            capture.close()
        raise StartupError(f"cannot start the broker: {_one_line(error)}") from None

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):  # Windows event loops lack signal handlers
            loop.add_signal_handler(signum, stop.set)
    ready = {"url": url, "port": server.port, "pid": os.getpid(), "startup_id": server.startup_id}
    status = EXIT_OK
    try:
        if options.ready_file is not None:
            write_ready_file(options.ready_file, ready)
        log.info("listening on %s (pid %d, app %s)", url, os.getpid(), adapter.name)
        await stop.wait()
        log.info("shutting down")
    except OSError as error:
        log.error("cannot write the ready file: %s", error.strerror)
        status = EXIT_USAGE
    finally:
        try:
            # stop() keeps to the budget itself; this is the backstop for a bug in it.
            await asyncio.wait_for(server.stop(), timeout=options.shutdown_timeout_s + 2.0)
        except TimeoutError:
            log.error("shutdown took longer than %.0f s", options.shutdown_timeout_s)
            status = EXIT_FAILED
        if options.ready_file is not None:
            _remove_ready_file(options.ready_file, server.startup_id)
    return status


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


@click.group()
def cli() -> None:
    """autocad-bench desktop broker."""


@cli.command(name="serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port.")
@click.option("--app", required=True, type=click.Choice(sorted(APP_FORMATS)), help="Application adapter.")
@click.option("--display", default=None, help="X display :N to drive (librecad).")
@click.option(
    "--workdir",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Runtime directory: frames, attempt, app home, events.",
)
@click.option(
    "--template", required=True, type=click.Path(dir_okay=False, path_type=Path), help="Drawing restored by reset."
)
@click.option(
    "--ready-file",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Written atomically with url/port/pid/startup_id once listening.",
)
@click.option("--broker-version", required=True, help="Image contract label reported by /health.")
@click.option(
    "--manifest",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Deployment manifest whose SHA-256 /health reports.",
)
@click.option("--settle-window-s", default=1.5, show_default=True, type=float, help="Post-action stability bound.")
@click.option("--settle-delay-s", default=0.1, show_default=True, type=float, help="Wait before the first grab.")
@click.option("--settle-interval-s", default=0.1, show_default=True, type=float, help="Wait between grabs.")
@click.option("--max-actions", default=DEFAULT_MAX_ACTIONS, show_default=True, type=click.IntRange(1))
@click.option("--reset-launches", default=2, show_default=True, type=click.IntRange(1, 5))
@click.option("--png-compress-level", default=6, show_default=True, type=click.IntRange(0, 9))
@click.option("--max-body-bytes", default=DEFAULT_MAX_BODY_BYTES, show_default=True, type=click.IntRange(1024))
@click.option("--shutdown-timeout-s", default=30.0, show_default=True, type=float)
@click.option(
    "--readiness",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Current-boot readiness record whose deployment id, startup id and prewarm /health reports.",
)
@click.option("--startup-id", default=None, help="Startup id to report instead of a random one.")
@click.option(
    "--log-file",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Append the log to this file instead of stderr.",
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"]),
)
def serve_command(
    host: str,
    port: int,
    app: str,
    display: str | None,
    workdir: Path,
    template: Path,
    ready_file: Path | None,
    broker_version: str,
    manifest: Path | None,
    settle_window_s: float,
    settle_delay_s: float,
    settle_interval_s: float,
    max_actions: int,
    reset_launches: int,
    png_compress_level: int,
    max_body_bytes: int,
    shutdown_timeout_s: float,
    readiness: Path | None,
    startup_id: str | None,
    log_file: Path | None,
    log_level: str,
) -> None:
    """Serve the broker protocol for one desktop (token from AUTOCAD_BENCH_BROKER_TOKEN)."""
    handler: logging.Handler
    if log_file is None:
        handler = logging.StreamHandler(sys.stderr)
    else:
        try:
            log_file.parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as error:
            raise StartupError(f"--log-file cannot be opened: {error.strerror or error}") from None
    logging.basicConfig(
        level=getattr(logging, log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=[handler],
    )
    options = ServeOptions(
        host=host,
        port=port,
        app=app,
        display=display,
        workdir=workdir.absolute(),
        template=template,
        ready_file=ready_file.absolute() if ready_file is not None else None,
        broker_version=broker_version,
        manifest=manifest,
        settle_window_s=settle_window_s,
        settle_delay_s=settle_delay_s,
        settle_interval_s=settle_interval_s,
        max_actions=max_actions,
        reset_launches=reset_launches,
        png_compress_level=png_compress_level,
        max_body_bytes=max_body_bytes,
        shutdown_timeout_s=shutdown_timeout_s,
        readiness=readiness.absolute() if readiness is not None else None,
        startup_id=startup_id,
    )
    token = read_token(os.environ)
    sys.exit(asyncio.run(serve(options, token)))


# Deployment helpers ---------------------------------------------------------------------------


def _print_json(payload: Any) -> None:
    click.echo(json.dumps(payload, sort_keys=True))


@cli.command(name="prewarm")
@click.option("--display", default=None, help="X display :N (Linux; default $DISPLAY). Not used on Windows.")
@click.option(
    "--timeout-s",
    default=2.0,
    show_default=True,
    type=click.FloatRange(0.0, 60.0),
    help="Longest wait for each move to arrive.",
)
def prewarm_command(display: str | None, timeout_s: float) -> None:
    """Move the real pointer to the desktop centre and back; print the result as JSON."""
    from autocad_bench_broker import readiness

    if sys.platform == "win32" and display is not None:
        raise click.UsageError("--display is only for X11; Windows uses the console desktop")
    started = time.monotonic()
    driver = PyAutoGUIDriver(display)
    reader: Any = None
    try:
        info = readiness.desktop_info(display)
        reader = readiness.pointer_reader(display)
        result = readiness.prewarm(driver, reader, info, timeout_s=timeout_s)
    except Exception as error:  # no reader, no display: still one JSON answer
        result = readiness.PrewarmResult(
            ok=False,
            problems=(f"{type(error).__name__}: {_one_line(error)}",),
            at=datetime.now(UTC),
            elapsed_ms=round((time.monotonic() - started) * 1000.0, 1),
        )
    finally:
        with contextlib.suppress(Exception):
            if reader is not None:
                reader.close()
            driver.close()
    _print_json(result.model_dump(mode="json"))
    sys.exit(EXIT_OK if result.ok else EXIT_FAILED)


@cli.group(name="manifest")
def manifest_group() -> None:
    """Write or verify the image's deployment manifest."""


@manifest_group.command(name="write")
@click.option(
    "--root",
    required=True,
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="Installation root; every listed file lies under it.",
)
@click.option("--output", required=True, type=click.Path(dir_okay=False, path_type=Path), help="manifest.json path.")
@click.option("--broker-version", required=True, help="Image contract label, e.g. windows-autocad-2019-v11.")
@click.option(
    "--broker-wheel",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The deployed broker wheel (under --root).",
)
@click.option(
    "--file",
    "files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A deployed file to list (relative paths are under --root); repeatable.",
)
@click.option(
    "--distribution",
    "distributions",
    multiple=True,
    help="An installed distribution whose files are listed; repeatable.",
)
@click.option(
    "--input-driver-archive",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The archive the input driver was installed from (its SHA-256 is recorded).",
)
@click.option("--deployment-id", default=None, help="GUID to use instead of a random one.")
@click.option("--new-deployment", is_flag=True, help="Write a new manifest even if nothing changed.")
def manifest_write_command(
    root: Path,
    output: Path,
    broker_version: str,
    broker_wheel: Path,
    files: tuple[Path, ...],
    distributions: tuple[str, ...],
    input_driver_archive: Path | None,
    deployment_id: str | None,
    new_deployment: bool,
) -> None:
    """Write the deployment manifest (kept as it is when nothing changed); print what was done."""
    from autocad_bench_broker import readiness

    try:
        manifest = readiness.build_manifest(
            root=root,
            broker_version=broker_version,
            broker_wheel=broker_wheel,
            files=files,
            distributions=distributions,
            input_driver_archive=input_driver_archive,
            deployment_id=deployment_id,
        )
        written = readiness.write_manifest(output, manifest, keep_unchanged=not new_deployment)
    except readiness.ReadinessError as error:
        raise StartupError(str(error)) from None
    except OSError as error:
        raise StartupError(f"cannot write the manifest: {error.strerror or error}") from None
    _print_json(
        {
            "manifest": str(output),
            "deployment_id": written.manifest.deployment_id,
            "manifest_sha256": written.sha256,
            "broker_sha256": written.manifest.broker_wheel.sha256,
            "input_driver_version": written.manifest.input_driver.version,
            "files": len(written.manifest.files),
            "unchanged": written.unchanged,
        }
    )


@manifest_group.command(name="verify")
@click.option("--manifest", "manifest_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--root",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Installation root (default: the manifest's own).",
)
def manifest_verify_command(manifest_path: Path, root: Path | None) -> None:
    """Re-hash every listed file and check the installed input driver; exit 1 on a difference."""
    from autocad_bench_broker import readiness

    check = readiness.verify_manifest(manifest_path, root=root)
    _print_json(check.model_dump(mode="json"))
    sys.exit(EXIT_OK if check.ok else EXIT_FAILED)


@cli.command(name="readiness-report")
@click.option("--readiness", "readiness_path", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--wait-s",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0.0, 600.0),
    help="Longest wait for a record of the current boot.",
)
@click.option(
    "--status",
    "status_path",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The launcher's start-status.json, whose failure is added to the problems.",
)
def readiness_report_command(readiness_path: Path, wait_s: float, status_path: Path | None) -> None:
    """Print the current boot and the readiness record (the AWS image's readiness.ps1)."""
    from autocad_bench_broker import readiness

    _print_json(readiness.readiness_report(readiness_path, status=status_path, wait_s=wait_s))


WINDOWS_SCRIPTS = ("Install-AutocadBenchBroker.ps1", "Start-AutocadBenchBroker.ps1")
"""The image build's scripts, shipped inside this package (``autocad_bench_broker/windows/``)."""


@cli.command(name="windows-scripts")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def windows_scripts_command(directory: Path) -> None:
    """Copy the Windows image scripts into DIRECTORY (see docs/windows-image.md).

    Never overwrites: an existing script of the same name is a usage error and nothing is copied.
    """
    source = Path(__file__).resolve().parent / "windows"
    existing = [directory / name for name in WINDOWS_SCRIPTS if (directory / name).exists()]
    if existing:
        raise click.UsageError(f"{existing[0]} already exists; choose an empty directory")
    directory.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in WINDOWS_SCRIPTS:
        shutil.copyfile(source / name, directory / name)
        copied.append(str(directory / name))
    _print_json({"copied": copied})


def main(argv: list[str] | None = None) -> None:
    """Console entry point: click in non-standalone mode so every error is one line."""
    try:
        result = cli.main(args=argv, prog_name="autocad-bench-broker", standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.Abort:
        click.echo("error: aborted", err=True)
        sys.exit(EXIT_USAGE)
    except click.exceptions.NoArgsIsHelpError as error:
        click.echo(error.format_message(), err=True)  # the help text itself, not an error line
        sys.exit(EXIT_USAGE)
    except click.ClickException as error:
        click.echo(f"error: {error.format_message()}", err=True)
        sys.exit(EXIT_USAGE)
    except StartupError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        sys.exit(EXIT_FAILED)
    except Exception as error:  # never a traceback: one line, exit 1
        click.echo(f"error: unexpected failure: {type(error).__name__}: {_one_line(error)}", err=True)
        sys.exit(EXIT_FAILED)
    sys.exit(result if isinstance(result, int) else EXIT_OK)
