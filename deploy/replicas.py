"""Start R SpecDec Lab replicas on local ports plus nginx in front of them (loopback).

    python deploy/replicas.py --replicas 2 --port 8500   # then open http://127.0.0.1:8500

Each replica is a plain ``streamlit run app.py`` on 127.0.0.1 with the same
``server.cookieSecret`` (XSRF cookies stay valid whichever replica answers) and
``SPECDEC_TORCH_THREADS`` = cores / R (unless set), and gets one warm-up session
(``deploy/warm_up.py``: imports and models loaded) before nginx starts. nginx runs from
Debian's package as a foreground process with its own prefix in a temp folder, with
``deploy/nginx-specdec.conf`` (websocket upgrade, cookie affinity, per-client limits) inside
:data:`MAIN_CONF` (workers, file descriptors, connections). Each replica's output goes to
``replica<i>.log``, rotated at :data:`LOG_MAX_BYTES` with :data:`LOG_BACKUPS` old copies;
nginx's error log keeps "error" and above only. Ctrl-C (or ``--seconds``) stops
everything. ``benchmarks/load_test.py --replicas 2``, ``benchmarks/classroom_ws.py`` and
``tests/test_replicas.py`` use :func:`cluster`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from warm_up import warm_up  # noqa: E402

SNIPPET = Path(__file__).with_name("nginx-specdec.conf")
COOKIE = "specdec_route"
# nginx.conf around the snippet. One worker per core; each worker may hold 8,192
# connections (a proxied request or websocket holds two: client and replica) and 16,384
# open files, so ≈ 4,000 visitors per worker, and a few thousand half-open requests from
# one client (closed after client_header_timeout, 10 s) leave room for everyone else.
# The first line of each pair is what a system nginx.conf needs too (deploy/README.md).
MAIN_CONF = """\
worker_processes auto;
worker_rlimit_nofile 16384;
{paths}events {{ worker_connections 8192; }}
http {{
    access_log off;
{temp}{snippet}
}}
"""
LOOPBACK_PATHS = "pid {prefix}/nginx.pid;\nerror_log {prefix}/error.log error;\ndaemon off;\n"
TEMP_PATHS = """\
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
"""
LOG_MAX_BYTES = 10 * 2**20  # a replica's log file: 10 MB, then rotated …
LOG_BACKUPS = 3  # … keeping 3 old copies: ≤ 40 MB per replica


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )


def render_snippet(servers: list[str], listen: str) -> str:
    """``deploy/nginx-specdec.conf`` with its placeholders filled in."""
    lines = "\n".join(f"    server {s};" for s in servers)
    text = SNIPPET.read_text().replace("\n__SERVERS__\n", f"\n{lines}\n")
    return text.replace("listen __LISTEN__;", f"listen {listen};")


def render_main(snippet: str, prefix: Path | None = None) -> str:
    """A whole ``nginx.conf`` around ``snippet``: with ``prefix`` for a loopback run (pid,
    error log and temp folders there), without for a container (the image's defaults;
    the error log goes to stderr, which Docker keeps and rotates; the image's command
    already says ``daemon off``)."""
    if prefix is None:
        paths, temp = "error_log stderr error;\n", ""
    else:
        paths, temp = LOOPBACK_PATHS.format(prefix=prefix), TEMP_PATHS.format(prefix=prefix)
    return MAIN_CONF.format(paths=paths, temp=temp, snippet=snippet)


def wait_healthy(
    url: str, proc: subprocess.Popen, log: Path | None = None, timeout_s: float = 120
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text()[-2000:] if log and log.exists() else ""
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}: {tail}")
        try:
            urllib.request.urlopen(url + "/_stcore/health", timeout=2)
            return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} not healthy after {timeout_s} s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@dataclass
class Cluster:
    """A running set: ``url`` is nginx's address; ``replicas`` the app processes."""

    url: str
    replicas: list[subprocess.Popen] = field(default_factory=list)
    replica_urls: list[str] = field(default_factory=list)
    nginx: subprocess.Popen | None = None
    logs: Path | None = None


def rotating_log(path: Path) -> RotatingFileHandler:
    """A size-bounded log file: :data:`LOG_MAX_BYTES`, then ``path.1`` … ``path.3``."""
    handler = RotatingFileHandler(
        path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8"
    )
    handler.setFormatter(logging.Formatter("%(message)s"))
    return handler


def pump_lines(stream: IO[bytes], handler: logging.Handler) -> threading.Thread:
    """Copy ``stream`` (a child's stderr) line by line into ``handler`` until it closes,
    in a daemon thread."""

    def pump() -> None:
        try:
            for raw in iter(stream.readline, b""):
                text = raw.decode("utf-8", "replace").rstrip("\n")
                handler.handle(logging.makeLogRecord({"msg": text, "levelno": 20}))
        finally:
            stream.close()
            handler.close()

    thread = threading.Thread(target=pump, name="specdec-replica-log", daemon=True)
    thread.start()
    return thread


def start_replica(port: int, log: Path, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.address",
            "127.0.0.1",
            "--server.port",
            str(port),
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    pump_lines(proc.stderr, rotating_log(log))
    return proc


async def _warm_all(urls: list[str]) -> None:
    await asyncio.gather(*(warm_up(url) for url in urls))


@contextmanager
def cluster(
    replicas: int = 2,
    port: int | None = None,
    env: dict[str, str] | None = None,
    warm: bool = True,
):
    """R replicas + nginx on 127.0.0.1; yields a :class:`Cluster`; stops all on exit.
    With ``warm`` each replica runs one warm-up session (``deploy/warm_up.py``) first.

    Raises:
        FileNotFoundError: nginx is not installed (``apt-get install nginx``).
    """
    binary = nginx_binary()
    if binary is None:
        raise FileNotFoundError("nginx is not installed (Debian: apt-get install nginx)")
    threads = str(max(1, (os.cpu_count() or 1) // replicas))
    base_env = {"HF_HUB_OFFLINE": "1", "SPECDEC_TORCH_THREADS": threads, **os.environ}
    base_env["STREAMLIT_SERVER_COOKIE_SECRET"] = secrets.token_hex(16)  # one for all
    base_env.update(env or {})
    with ExitStack() as stack:
        prefix = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="specdec-")))
        ports = [free_port() for _ in range(replicas)]
        run = Cluster(url="", logs=prefix)
        for i, p in enumerate(ports):
            proc = start_replica(p, prefix / f"replica{i}.log", base_env)
            stack.callback(_stop, proc)
            run.replicas.append(proc)
            run.replica_urls.append(f"http://127.0.0.1:{p}")
        listen = f"127.0.0.1:{port or free_port()}"
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (prefix / "tmp" / sub).mkdir(parents=True)
        snippet = render_snippet([f"127.0.0.1:{p}" for p in ports], listen)
        conf = prefix / "nginx.conf"
        conf.write_text(render_main(snippet, prefix))
        if os.geteuid() == 0:  # workers would drop to "nobody": keep the temp dirs usable
            for d in [prefix, *prefix.rglob("*")]:
                if d.is_dir():
                    d.chmod(0o777)
        nginx_log = open(prefix / "nginx.out", "w")  # noqa: SIM115 - closed by the stack
        stack.callback(nginx_log.close)
        run.nginx = subprocess.Popen(
            [binary, "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(conf)],
            stdout=nginx_log,
            stderr=nginx_log,
        )
        stack.callback(_stop, run.nginx)
        for i, (url, proc) in enumerate(zip(run.replica_urls, run.replicas, strict=True)):
            wait_healthy(url, proc, prefix / f"replica{i}.log")
        if warm:  # imports, st.navigation, the models: before any student arrives
            asyncio.run(_warm_all(run.replica_urls))
        run.url = f"http://{listen}"
        wait_healthy(run.url, run.nginx, prefix / "nginx.out", timeout_s=20)
        yield run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--port", type=int, default=8500, help="nginx port on 127.0.0.1")
    parser.add_argument("--seconds", type=float, default=0, help="stop after (0: Ctrl-C)")
    parser.add_argument("--render", metavar="HOST:PORT,...", help="only print the snippet")
    parser.add_argument("--listen", default="80", help="with --render: nginx's listen")
    parser.add_argument(
        "--main",
        action="store_true",
        help="with --render: a whole nginx.conf (workers, connections)",
    )
    args = parser.parse_args()
    if args.render:  # e.g. for deploy/compose.yaml: --render app1:8501,app2:8501 --main
        snippet = render_snippet(args.render.split(","), args.listen)
        print(render_main(snippet) if args.main else snippet, end="")
        return
    with cluster(args.replicas, args.port) as run:
        print(f"{args.replicas} replicas {' '.join(run.replica_urls)} behind nginx: {run.url}")
        print(f"logs in {run.logs}", flush=True)
        try:
            time.sleep(args.seconds or 10**9)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
