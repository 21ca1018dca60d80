"""A grammar compile that can be stopped: xgrammar in a child process, killed at its bound.

xgrammar compiles in C++ without a way to interrupt it, so a compile in a thread of the
server runs to its end whoever waits for it. Here it runs in a child: a fresh interpreter
started like the measurement worker (``server/worker.py``: fork + exec with ``subprocess``
and a ``multiprocessing.connection`` pipe, so nothing of the threaded server is copied and
Streamlit's ``__main__`` is never replayed). The child lives on between compiles (importing
xgrammar costs ≈ 2 CPU-s) at ``nice`` +10; :meth:`Child.compile` kills it when the bound
ends, so no CPU is spent after that. One compile at a time per child.

Wire format, one message each way per compile: ``(tokenizer key, TokenizerInfo JSON or
None when the child already holds it, kind, source)`` out; ``("ok", CompiledGrammar JSON)``
or ``("error", first line of xgrammar's message)`` back (``serialize_json`` /
``deserialize_json``, xgrammar ≥ 0.1.19).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path

CHILD_NICE = 10  # CFS weight 110 against a student's 1024 (see server/worker.py)
START_S = 60.0  # a fresh child (python + xgrammar import) is ready within this
ROOT = Path(__file__).resolve().parents[2]  # the folder that holds specdec_core
_ENTRY = "from specdec_core.core.grammar_child import main; main()"


class ChildTimeout(Exception):
    """The compile overran its bound; the child was killed."""


class ChildStopped(Exception):
    """Nobody waited for the compile any more (every tab that asked closed); killed."""


class ChildGone(Exception):
    """The child died (killed from outside, crashed) or never became ready."""


def _orphan_watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def main() -> None:
    """The child (``argv``: pipe fd, nice, the server's pid): compile until the pipe closes."""
    fd, nice, parent = (int(a) for a in sys.argv[1:4])
    try:
        os.nice(nice)
    except OSError:  # not allowed here: the server's priority
        pass
    threading.Thread(target=_orphan_watch, args=(parent,), daemon=True).start()
    import xgrammar as xgr

    conn = Connection(fd)
    conn.send("ready")
    compilers: dict[str, object] = {}
    while True:
        try:
            key, info_json, kind, source = conn.recv()
        except (EOFError, OSError, TypeError, ValueError):
            return
        try:
            if info_json is not None:
                info = xgr.TokenizerInfo.deserialize_json(info_json)
                compilers[key] = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
            compiler = compilers[key]
            if kind == "regex":
                compiled = compiler.compile_regex(source)
            else:
                compiled = compiler.compile_json_schema(
                    source, any_whitespace=False, strict_mode=True
                )
            reply = ("ok", compiled.serialize_json())
        except Exception as exc:  # noqa: BLE001 - xgrammar's RuntimeError: sent back as text
            reply = ("error", str(exc) or type(exc).__name__)
        try:
            conn.send(reply)
        except OSError:  # the server is gone
            return


class Child:
    """The server's handle on one compile child. Used by one thread at a time."""

    def __init__(self) -> None:
        parent, child = Pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        argv = [sys.executable, "-c", _ENTRY, str(child.fileno()), str(CHILD_NICE)]
        try:
            self.proc = subprocess.Popen(
                [*argv, str(os.getpid())],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            child.close()  # EOF reaches us when the child dies
        self.conn: Connection = parent
        self.launched = time.monotonic()
        self.ready = False
        self.keys: set[str] = set()  # tokenizers the child holds

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _wait(self, deadline: float, stop: Callable[[], bool] | None = None) -> object:
        """The child's next message, or raise when ``deadline`` (monotonic) passes or
        ``stop()`` says nobody waits any more (asked every 0.1 s; the child is killed)."""
        while True:
            left = deadline - time.monotonic()
            try:
                if self.conn.poll(max(0.0, min(0.1, left))):
                    return self.conn.recv()
            except (EOFError, OSError):
                self.kill()
                raise ChildGone("the compile process stopped") from None
            if not self.alive():
                self.kill()
                raise ChildGone(f"the compile process exited ({self.proc.returncode})")
            if left <= 0:
                self.kill()
                raise ChildTimeout
            if stop is not None and stop():
                self.kill()
                raise ChildStopped

    def compile(
        self,
        key: str,
        info_json: str,
        kind: str,
        source: str,
        bound_s: float,
        stop: Callable[[], bool] | None = None,
    ) -> tuple:
        """Compile in the child within ``bound_s`` seconds of sending it (a child not ready
        yet is first given up to :data:`START_S` from its launch: start-up is not the
        grammar's cost; a server starts one early, :func:`grammar_compile.prestart`).

        Returns:
            ``("ok", CompiledGrammar JSON)`` or ``("error", xgrammar's message)``.

        Raises:
            ChildTimeout: the compile overran; the child is killed (no CPU spent after).
            ChildStopped: ``stop()`` became true during the compile; the child is killed.
            ChildGone: the child died, or did not start within :data:`START_S`.
        """
        if not self.ready:
            if self._wait(self.launched + START_S) != "ready":
                self.kill()
                raise ChildGone("the compile process did not start")
            self.ready = True
        try:
            self.conn.send((key, None if key in self.keys else info_json, kind, source))
        except OSError:
            self.kill()
            raise ChildGone("the compile process stopped") from None
        self.keys.add(key)
        reply = self._wait(time.monotonic() + bound_s, stop)
        if not (isinstance(reply, tuple) and len(reply) == 2):
            self.kill()
            raise ChildGone("the compile process sent nonsense")
        return reply

    def kill(self) -> None:
        """Kill the child (SIGKILL) and reap it; idempotent."""
        self.conn.close()
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            pass
