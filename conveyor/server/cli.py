"""`conveyor server`: options, config file, and the server process."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import ipaddress
import logging
import re
import signal
import ssl
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import click

from conveyor import build, logs
from conveyor.clock import Clock
from conveyor.server import s3subset
from conveyor.server.access import AccessKey
from conveyor.server.app import App, ServerSettings
from conveyor.server.config import ConfigError, declare_queues, load, queue_declarations
from conveyor.server.console.auth import DEFAULT_SESSION_S
from conveyor.server.http import MAX_CONNECTIONS, REQUEST_TIMEOUT_S, HttpServer
from conveyor.service import Service
from conveyor.sqs import shapes
from conveyor.sqs.limits import MODES
from conveyor.store.base import Store, StoreError
from conveyor.store.journal import JournaledStore

log = logging.getLogger("conveyor.server")

DEFAULT_PORT = 9324  # ElasticMQ's port: existing local-SQS setups point here already
LOG_LEVELS = ("debug", "info", "warning", "error")
OPERATOR_MAX_BODY_BYTES = 64 * 1024  # the metrics listener takes GETs only
# RFC 6750 §2.1: what a bearer token may contain (b64token), so it fits the header as is.
SHARD_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
BEARER_TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
# File descriptors kept for other than client connections: the store's files, the log, the
# event loop's own; PostgreSQL connections (--pool-size) come on top.
FD_RESERVE = 64


@click.command("server")
@click.option("--host", envvar="CONVEYOR_HOST", help="Address to listen on  [default: 127.0.0.1]")
@click.option("--port", type=int, envvar="CONVEYOR_PORT",
              help=f"Port to listen on; 0 picks a free one, which the start-up line names  "
              f"[default: {DEFAULT_PORT}]")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              envvar="CONVEYOR_DATA_DIR", help="Where the SQLite store lives  "
              "[default: ./conveyor-data]")
@click.option("--store", envvar="CONVEYOR_STORE", metavar="sqlite|postgresql://...",
              help="sqlite (embedded, in --data-dir) or a PostgreSQL URL shared by several "
              "nodes; `?schema=name` keeps Conveyor's tables in that schema  [default: sqlite]")
@click.option("--store-listen", envvar="CONVEYOR_STORE_LISTEN", metavar="postgresql://...|poll",
              help="When --store is a PgBouncer in transaction pooling mode: a URL straight "
              "to PostgreSQL for the nodes' wake-ups (LISTEN), or poll (long polls look at "
              "their queues every second instead). Nothing is then kept in --store's "
              "sessions.")
@click.option("--shard", "shards", multiple=True, metavar="NAME=postgresql://...",
              envvar="CONVEYOR_SHARDS",
              help="Queues spread over several PostgreSQL primaries instead of --store "
              "(repeatable; CONVEYOR_SHARDS takes several, space-separated). The first "
              "holds the catalog of where each queue lives; keep each name with its "
              "database.")
@click.option("--pool-size", type=click.IntRange(1, 1000), envvar="CONVEYOR_POOL_SIZE",
              help="PostgreSQL connections per node  [default: 10]")
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), envvar="CONVEYOR_CONFIG",
              help="YAML file with these settings and queues to create at start.")
@click.option("--mode", type=click.Choice(sorted(MODES)), envvar="CONVEYOR_MODE",
              help="strict: Amazon's limits and cool-downs; relaxed: for test suites "
              "[default: strict]")
@click.option("--account-id", envvar="CONVEYOR_ACCOUNT_ID", help="[default: 000000000000]")
@click.option("--region", envvar="CONVEYOR_REGION",
              help="Region for unsigned requests  [default: us-east-1]")
@click.option("--access-key", "access_keys", multiple=True, metavar="KEY:SECRET",
              envvar="CONVEYOR_ACCESS_KEY",
              help="Accept SigV4 requests signed with this key, with full access "
              "(repeatable; CONVEYOR_ACCESS_KEY takes several, space-separated; keys "
              "limited to actions and queues go in the config file). "
              "Without any, requests are not authenticated.")
# Both also as variables: a CI system's service container gets environment, not arguments.
@click.option("--allow-open", is_flag=True, default=None, envvar="CONVEYOR_ALLOW_OPEN",
              help="Listen on a non-loopback address without access keys (also "
              "CONVEYOR_ALLOW_OPEN=true).")
@click.option("--metrics-token", envvar="CONVEYOR_METRICS_TOKEN", metavar="TOKEN",
              help="GET /metrics then needs `Authorization: Bearer TOKEN`.")
@click.option("--metrics-port", type=int, envvar="CONVEYOR_METRICS_PORT",
              help="Serve /metrics (and /health, /ready) on 127.0.0.1:PORT only, no longer on "
              "--port.")
@click.option("--console-session-hours", type=float, envvar="CONVEYOR_CONSOLE_SESSION_HOURS",
              help=f"How long a console sign-in lasts  [default: {DEFAULT_SESSION_S // 3600}]")
@click.option("--request-timeout", type=click.FloatRange(0, min_open=True), metavar="SECONDS",
              envvar="CONVEYOR_REQUEST_TIMEOUT",
              help="Time a client has to send a whole request once it has begun, else 408; "
              "a new connection's first byte must come within 10 s or this, if shorter. "
              "Answers (long polls) are not timed  [default: 30]")
@click.option("--max-connections", type=click.IntRange(1), envvar="CONVEYOR_MAX_CONNECTIONS",
              help="Open connections beyond which new ones are closed at once (lowered to "
              f"what the open-files limit allows)  [default: {MAX_CONNECTIONS}]")
@click.option("--tls-cert", metavar="PATH", envvar="CONVEYOR_TLS_CERT",
              help="Serve HTTPS with this PEM certificate (chain).")
@click.option("--tls-key", metavar="PATH", envvar="CONVEYOR_TLS_KEY",
              help="The certificate's PEM private key, unencrypted  [default: in --tls-cert]")
@click.option("--payload-dir", metavar="DIR", envvar="CONVEYOR_PAYLOAD_DIR",
              help="Serve the embedded S3-compatible blob store for large payloads at "
              f"{s3subset.PREFIX} from DIR; 'off' = none  [default: <data-dir>/payloads "
              "with SQLite, off with PostgreSQL]")
@click.option("--payload-max-bytes", type=click.IntRange(1), envvar="CONVEYOR_PAYLOAD_MAX_BYTES",
              help="Largest object the embedded blob store accepts  "
              f"[default: {s3subset.DEFAULT_MAX_OBJECT_BYTES}]")
@click.option("--log-level", type=click.Choice(LOG_LEVELS),
              envvar="CONVEYOR_LOG_LEVEL", help="[default: info]")
@click.option("--dev-clock-skew", type=float, hidden=True,
              help="Tests only: pretend this machine's clock is SECONDS off.")
@click.option("--dev-clock", is_flag=True, hidden=True,
              help="Tests only: POST /_conveyor/clock?advance=SECONDS moves server time.")
def server_command(config_path: Path | None, **options: Any) -> None:
    """Run the SQS-compatible queue server on a durable SQLite store."""
    try:
        settings = _settings(config_path, options)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    run(settings)


def _settings(config_path: Path | None, options: dict[str, Any]) -> dict[str, Any]:
    file = load(config_path) if config_path else {}
    merged = {"host": "127.0.0.1", "port": DEFAULT_PORT, "data_dir": "conveyor-data",
              "store": "sqlite", "pool_size": 10,
              "mode": "strict", "account_id": "000000000000", "region": "us-east-1",
              "log_level": "info", "allow_open": False, "metrics_token": "",
              "metrics_port": None, "console_session_hours": DEFAULT_SESSION_S / 3600,
              "request_timeout": REQUEST_TIMEOUT_S, "max_connections": MAX_CONNECTIONS,
              "payload_dir": None, "payload_max_bytes": s3subset.DEFAULT_MAX_OBJECT_BYTES,
              **file}
    for key, value in options.items():
        if value not in (None, ()):
            merged[key] = value
    keys = dict(file.get("access_keys") or {})
    for pair in options.get("access_keys") or ():
        key, sep, secret = pair.partition(":")
        if not sep or not key or not secret:
            raise ConfigError(f"--access-key {pair!r}: expected KEY:SECRET")
        keys[key] = AccessKey(key, secret)
    merged["access_keys"] = keys
    merged["queues"] = queue_declarations(file.get("queues"))
    merged["shards"] = shard_settings(file.get("shards") or {}, options.get("shards") or ())
    if merged["mode"] not in MODES:
        raise ConfigError(f"mode: expected one of {sorted(MODES)}")
    if merged["log_level"] not in LOG_LEVELS:
        raise ConfigError(f"log_level: expected one of {list(LOG_LEVELS)}")
    if not 0 <= merged["port"] <= 65535:
        raise ConfigError(f"port: expected 0-65535, not {merged['port']}")
    _check_metrics(merged)
    if merged["console_session_hours"] is None:  # `console_session_hours:` left empty
        merged["console_session_hours"] = DEFAULT_SESSION_S / 3600
    if not 0 < merged["console_session_hours"] <= 24 * 365:
        raise ConfigError("console_session_hours: expected more than 0 and at most a year, "
                          f"not {merged['console_session_hours']}")
    _check_store_listen(merged)
    if merged["pool_size"] < 1:
        raise ConfigError(f"pool_size: expected at least 1, not {merged['pool_size']}")
    if not 0 < merged["request_timeout"] < float("inf"):
        raise ConfigError(f"request_timeout: expected seconds above 0, not "
                          f"{merged['request_timeout']}")
    if merged["max_connections"] < 1:
        raise ConfigError(f"max_connections: expected at least 1, not "
                          f"{merged['max_connections']}")
    if merged.get("tls_key") and not merged.get("tls_cert"):
        raise ConfigError("tls_key without tls_cert: give the certificate too")
    if not keys and not merged["allow_open"] and not _is_loopback(merged["host"]):
        raise ConfigError(
            f"refusing to listen on {merged['host']} without access keys: anyone who can reach "
            "it could read and delete messages. Pass --access-key KEY:SECRET, or --allow-open "
            "if the network is trusted.")
    return merged


def _check_store_listen(merged: dict[str, Any]) -> None:
    listen = merged.get("store_listen")
    if listen is None:
        return
    if merged["store"] == "sqlite":  # shards too: one direct URL would not fit them all
        raise ConfigError("store_listen: only with a PostgreSQL store (--store postgresql://...),"
                          " not with SQLite or shards")
    from conveyor.store.postgres import POLL
    if listen != POLL and not listen.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"store_listen: expected a postgresql:// URL or {POLL}, not {listen!r}")


def shard_settings(configured: dict[Any, Any], given: tuple[str, ...]) -> dict[str, str]:
    """Shard name -> PostgreSQL URL, from the config's `shards` or else the --shard
    options (NAME=URL each), in order: the first is the catalog shard."""
    shards = {str(name): url for name, url in configured.items()}
    if given:
        shards = {}
        for pair in given:
            name, sep, url = pair.partition("=")
            if not sep:
                raise ConfigError(f"--shard {pair!r}: expected NAME=postgresql://...")
            if name in shards:
                raise ConfigError(f"--shard {name}: named twice")
            shards[name] = url
    for name, url in shards.items():
        if not SHARD_NAME.fullmatch(name):
            raise ConfigError(f"shards: {name!r}: expected a name of letters, digits, - and _")
        if not isinstance(url, str) or not url.startswith(("postgresql://", "postgres://")):
            raise ConfigError(f"shards: {name}: expected a postgresql:// URL, not {url!r}")
    return shards


def _check_metrics(merged: dict[str, Any]) -> None:
    token, port = merged["metrics_token"], merged["metrics_port"]
    if token and not BEARER_TOKEN.fullmatch(token):
        raise ConfigError("metrics_token: expected letters, digits and -._~+/ (then any '='), "
                          "as RFC 6750 allows in a bearer token")
    if port is not None and not 1 <= port <= 65535:
        raise ConfigError(f"metrics_port: expected 1-65535, not {port}")
    if port is not None and port == merged["port"]:
        raise ConfigError(f"metrics_port: expected a port other than the main one ({port})")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def run(settings: dict[str, Any]) -> None:
    logs.setup(settings["log_level"])
    try:
        _event_loop_runner()(serve(settings))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise click.ClickException(
                f"{settings['host']}:{settings['port']} is already in use (another Conveyor "
                "server, or ElasticMQ on its default port?); choose another with --port.") from None
        raise click.ClickException(str(exc)) from None
    except (StoreError, ConfigError) as exc:
        raise click.ClickException(str(exc)) from None


async def serve(settings: dict[str, Any]) -> None:
    """Open the store, declare queues, listen until SIGTERM / SIGINT, then drain."""
    tls = tls_context(settings["tls_cert"], settings.get("tls_key")) if settings.get(
        "tls_cert") else None
    max_connections = connection_cap(settings["max_connections"],
                                     FD_RESERVE + settings["pool_size"])
    clock = Clock(settings.get("dev_clock_skew") or 0.0)
    store = await open_store(settings, clock)
    service = Service(store, MODES[settings["mode"]], clock, settings["account_id"])
    try:
        await declare_queues(service, settings["queues"], settings["account_id"],
                             settings["region"])
        app = App(service, ServerSettings(
            account_id=settings["account_id"], default_region=settings["region"],
            access_keys=settings["access_keys"], dev_clock=settings.get("dev_clock") or False,
            metrics_token=settings["metrics_token"] or "",
            metrics_port=settings["metrics_port"],
            console_session_s=round(settings["console_session_hours"] * 3600)))
        app.blobs = _blob_store(settings)
        large_bodies = None if app.blobs is None else (
            s3subset.PREFIX.encode() + b"/", app.blobs.max_object_bytes)
        http = HttpServer(app.handle, service.limits.max_request_bytes,
                          request_timeout_s=settings["request_timeout"],
                          max_connections=max_connections, tls=tls, large_bodies=large_bodies)
        port = await http.start(settings["host"], settings["port"])
        metrics_listener = await _start_metrics_listener(app, settings)
        app.start()
        # The SQS model is read from botocore's data once, here rather than in the first
        # request, so that gc.freeze() below keeps its many objects out of collections.
        shapes.service_model()
        # Requests allocate many short-lived objects and few cycles: collect young
        # objects less often, and never scan what start-up loaded.
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)
        where = (Path(settings["data_dir"]).resolve() if _on_sqlite(settings)
                 else f"postgresql, {len(settings['shards'])} shards" if settings["shards"]
                 else "postgresql")
        log.info("Conveyor listening on %s://%s:%s (store: %s, mode: %s, %s); console at "
                 "/console", http.scheme, settings["host"], port, where, settings["mode"],
                 build.name())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        log.info("shutting down: answering long polls, finishing requests")
        app.stop()
        await http.stop()
        if metrics_listener is not None:
            await metrics_listener.stop()
        with contextlib.suppress(StoreError):  # the store says why, once
            await app.service.save_activity()  # the charts' last seconds
    finally:
        await store.close()


def _on_sqlite(settings: dict[str, Any]) -> bool:
    return settings["store"] == "sqlite" and not settings["shards"]


def _blob_store(settings: dict[str, Any]) -> s3subset.S3Subset | None:
    """The embedded blob store (--payload-dir), on by default beside the SQLite store."""
    where = settings["payload_dir"]
    if where is None and _on_sqlite(settings):
        where = str(Path(settings["data_dir"]) / "payloads")
    if where is None or where == "off":
        return None
    try:
        return s3subset.S3Subset(Path(where), settings["access_keys"],
                                 max_object_bytes=settings["payload_max_bytes"])
    except OSError as exc:
        raise ConfigError(f"--payload-dir {where}: {exc.strerror or exc}") from None


async def _start_metrics_listener(app: App, settings: dict[str, Any]) -> HttpServer | None:
    """The --metrics-port listener, on loopback only; without one, warn if /metrics is open
    on a server that otherwise wants keys."""
    if settings["metrics_port"] is None:
        if settings["access_keys"] and not settings["metrics_token"]:
            log.warning("/metrics is open to anyone who can reach this server although access "
                        "keys are set (it names every queue and its message counts); protect "
                        "it with --metrics-token or --metrics-port")
        return None
    listener = HttpServer(app.handle_operator, OPERATOR_MAX_BODY_BYTES)
    try:
        port = await listener.start("127.0.0.1", settings["metrics_port"])
    except OSError as exc:
        raise ConfigError(f"--metrics-port {settings['metrics_port']}: {exc.strerror}") from None
    log.info("metrics at http://127.0.0.1:%s/metrics (not on the main port)", port)
    return listener
def tls_context(cert: str, key: str | None) -> ssl.SSLContext:
    """A server context from PEM files (the key may sit in the certificate's file); any
    problem with them is a ConfigError naming the file, found before the server starts."""
    for option, path in (("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not Path(path).is_file():
            raise ConfigError(f"{option} {path}: no such file")

    def encrypted() -> str:  # called for an encrypted key; OpenSSL would prompt on the tty
        raise ConfigError(f"--tls-key {key or cert}: the private key is encrypted; give an "
                          "unencrypted one (readable by this user only)")

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)  # TLS 1.2 and later, modern ciphers
    context.set_alpn_protocols(["http/1.1"])  # so a client offering h2 knows not to use it
    try:
        context.load_cert_chain(cert, key, password=encrypted)
    except (OSError, ssl.SSLError) as exc:
        detail = getattr(exc, "reason", None) or exc
        hint = "" if key else "; without --tls-key the key must be in the certificate's file"
        raise ConfigError(f"--tls-cert {cert}, --tls-key {key or cert}: not a PEM "
                          f"certificate and its private key ({detail}){hint}") from None
    return context


def connection_cap(wanted: int, reserve: int) -> int:
    """`wanted`, if the process may open that many files plus `reserve` (raising its soft
    limit toward the hard one when needed, as Go programs do); else what fits, with a
    warning, so the server refuses connections cleanly rather than failing to accept."""
    try:
        import resource
    except ImportError:  # pragma: no cover - no RLIMIT_NOFILE on Windows
        return wanted
    need = wanted + reserve
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        raised = need if hard == resource.RLIM_INFINITY else min(need, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
    if soft == resource.RLIM_INFINITY or soft >= need:
        return wanted
    cap = max(1, soft - reserve)
    log.warning("max_connections lowered from %d to %d: the process may open %d files "
                "(raise `ulimit -n` for more)", wanted, cap, soft)
    return cap


async def open_store(settings: dict[str, Any], clock: Clock) -> Store:
    """`--store sqlite` (the default, in --data-dir) or `--store postgresql://...`."""
    target = settings["store"]
    if settings.get("shards"):
        if target != "sqlite":
            raise ConfigError("give either --store or shards, not both")
        from conveyor.store.postgres import PostgresStore
        from conveyor.store.shards import ShardedStore

        try:
            return await ShardedStore({name: PostgresStore(url, settings["pool_size"], clock)
                                       for name, url in settings["shards"].items()}).open()
        except ValueError as exc:
            raise ConfigError(f"shards: not a valid PostgreSQL URL ({exc})") from None
    if target == "sqlite":
        return JournaledStore(settings["data_dir"])
    if target.startswith(("postgresql://", "postgres://")):
        from conveyor.store.postgres import PostgresStore

        try:
            return await PostgresStore(target, settings["pool_size"], clock,
                                       listen=settings.get("store_listen")).open()
        except ValueError as exc:  # the driver's DSN parser: a bad port, option or host list
            raise ConfigError(f"--store: not a valid PostgreSQL URL ({exc})") from None
    raise ConfigError(f"--store {target!r}: expected sqlite or a postgresql:// URL")


def _event_loop_runner() -> Callable[[Coroutine[Any, Any, None]], None]:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is not available on Windows
        return asyncio.run
    return uvloop.run
