"""`latentforge ARGS` in a process of its own that does not pay the imports: each run is a child forked from a
warm interpreter (one per test process) that imported torch, numpy, h5py, PyAV, pyarrow, transformers' T5 and the
CLI and ran nothing else. A fresh interpreter spends 3-4 s importing them, and the suite runs a hundred such processes.

The child is a process as a user's `latentforge` is one: its own pid, environment, working folder, file
descriptors 1 and 2 (read back when it ends), default signal handlers, its exit status (-N when a signal ended it,
as subprocess reports), the interpreter's exit path (atexit handlers run) and its own children (spawned ranks and
decode workers start fresh interpreters, as always). What it cannot show is a fresh interpreter's import-time
behaviour: tests of that (tests/cli/test_startup.py) and of signals sent from outside use subprocess directly.

The warm interpreter is this module run with `python -c`, so a spawned rank imports no `__main__` of ours. It
serves requests one at a time over a pipe: (args, env, cwd, timeout) in, (returncode, stdout, stderr) out. What
an interpreter reads from its environment at start-up (PYTHONPATH, thread and CPU-capability settings) is the
warm one's, so there is one warm interpreter per environment, variables read only when the command runs aside:
LATENTFORGE_* (latentforge reads those when it runs, never at import), RAY_* and AWS_* (read by Ray, boto and s3fs,
which are not among the warm imports: serve() refuses to start if they become one), TMPDIR (tempfile reads it
once per process: the child forgets the warm interpreter's answer) and PYTEST_CURRENT_TEST (pytest sets it to the
running test's name; no warm import reads it). A test's moto server, Ray cluster or temp folder, and
the test's name, then cost no warm interpreter of their own (each one spends 7-8 s of CPU on its imports on a
2.0 GHz core).
"""

from __future__ import annotations

import atexit
import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_WARM_IMPORTS = ("torch", "numpy", "h5py", "av", "pyarrow", "latentforge.cli.main", "latentforge.builder.run",
                 "latentforge.pipeline.unit", "latentforge.verification.entry",
                 "transformers.models.t5.modeling_t5", "transformers.models.auto.tokenization_auto")
# environment no warm import keeps: not in a server's key
_READ_WHEN_RUN = ("LATENTFORGE_", "RAY_", "AWS_", "TMPDIR", "PYTEST_CURRENT_TEST")
_READ_WHEN_RUN_BY = ("ray", "boto3", "botocore", "aiobotocore", "s3fs")  # the modules that read RAY_* and AWS_*
_servers: dict[frozenset, subprocess.Popen] = {}
_servers_lock = threading.Lock()


# ------------------------------------------------------------------------------------------------ test side


def run_forked(args: list[str], env: dict[str, str], cwd: str | Path | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `latentforge ARGS` in a child of the warm interpreter, as subprocess.run(capture_output=True, text=True)
    would in a fresh one; TimeoutExpired when it outlives `timeout` (the child is killed first)."""
    command = ["latentforge", *args]
    with _servers_lock:
        server = _warm_server(env)
        _send(server.stdin, (list(args), dict(env), str(cwd) if cwd is not None else None, timeout))
        reply = _receive(server.stdout)
    if reply is None:
        raise RuntimeError("the warm latentforge interpreter died; see its stderr above")
    code, stdout, stderr = reply
    if code is None:
        raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
    return subprocess.CompletedProcess(command, code, stdout, stderr)


def _warm_server(env: dict[str, str]) -> subprocess.Popen:
    """The warm interpreter started with `env` (the variables of _READ_WHEN_RUN aside), started now if there is
    none alive."""
    start_env = {k: v for k, v in env.items() if not k.startswith(_READ_WHEN_RUN)}
    key = frozenset(start_env.items())
    server = _servers.get(key)
    if server is None or server.poll() is not None:
        source = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import cli_fork; cli_fork.serve()"
        server = _servers[key] = subprocess.Popen([sys.executable, "-c", source], stdin=subprocess.PIPE,
                                                  stdout=subprocess.PIPE, env=start_env)
        atexit.register(server.kill)
    return server


def _send(stream, message: Any) -> None:
    data = pickle.dumps(message)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream) -> Any:
    header = stream.read(8)
    if len(header) < 8:
        return None
    (size,) = struct.unpack("<Q", header)
    return pickle.loads(stream.read(size))


# ---------------------------------------------------------------------------------------------- server side


def serve() -> None:
    """The warm interpreter: import, then fork one child per request, wait for it, report it."""
    import importlib

    requests, replies = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # nothing printed here, by Python or a library's C code, may reach the reply pipe
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for name in _WARM_IMPORTS:
        importlib.import_module(name)
    early = [name for name in _READ_WHEN_RUN_BY if name in sys.modules]
    if early:  # it would read RAY_* or AWS_* now, and every child would get this interpreter's values
        raise RuntimeError(f"the warm imports imported {early}: take RAY_ and AWS_ out of _READ_WHEN_RUN")
    pipes = (requests.fileno(), replies.fileno())
    while (request := _receive(requests)) is not None:
        _send(replies, _run_child(*request, pipes))


def _run_child(args: list[str], env: dict[str, str], cwd: str | None, timeout: float, pipes: tuple) -> tuple:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            for fd in pipes:  # the child holds no end of the warm interpreter's pipes
                os.close(fd)
            _child(args, env, cwd, out.fileno(), err.fileno())
        code = _wait(pid, timeout)
        out.seek(0)
        err.seek(0)
        return code, out.read().decode(errors="replace"), err.read().decode(errors="replace")


def _wait(pid: int, timeout: float) -> int | None:
    """The child's returncode as subprocess gives it, or None after killing it at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.02)


def _child(args: list[str], env: dict[str, str], cwd: str | None, out: int, err: int) -> None:
    """Become `latentforge ARGS`; never returns."""
    code: Any = 1
    try:
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGUSR1):
            signal.signal(number, signal.SIG_DFL if number != signal.SIGINT else signal.default_int_handler)
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", encoding=sys.__stdout__.encoding, errors=sys.__stdout__.errors, closefd=False)
        sys.stderr = open(2, "w", encoding=sys.__stderr__.encoding, errors="backslashreplace", closefd=False)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # found again from this environment's TMPDIR, as a fresh interpreter would
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = ["latentforge", *args]
        from latentforge.cli.main import main

        code = main(args)
    except SystemExit as exit_:
        code = exit_.code
    except BaseException:  # noqa: BLE001 - as the interpreter would: the traceback on stderr, status 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            if code is None:
                code = 0
            elif not isinstance(code, int):
                print(code, file=sys.stderr)
                sys.stderr.flush()
                code = 1
            os._exit(code)
