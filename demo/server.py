"""Run the demo game as a real Evennia server, to see the web inspector in a browser.

``start`` plays the demo first when the game's database holds no compaction yet (so the
assistant has a history, compactions, a journal and memories to show), adds the
inspector's URL line to the game's ``web/website/urls.py`` and its own ports to the game's
settings (loopback only, away from Evennia's defaults), then runs ``evennia start`` and
waits until the website answers. ``stop`` runs ``evennia stop``. Every line printed fits
78 columns.

Usage (``make demo-server`` and ``make demo-server-stop`` run this)::

    python demo/server.py start|stop [GAME_DIR]
"""

import base64
import os
import pickle
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request

DEMO_DIR = os.path.dirname(os.path.abspath(__file__))
# A game of its own: the commands and URLs added here stay out of the demo's and of
# `make evennia-test`'s game (build/demo_game).
DEFAULT_GAME_DIR = os.path.join(os.path.dirname(DEMO_DIR), "build", "demo_server")
# Ports away from Evennia's defaults (4000-4006), on loopback: a throwaway game.
TELNET_PORT = 4480
WEB_PORT = 4481
WEB_URL = f"http://127.0.0.1:{WEB_PORT}"
# The superuser the first start creates (a builder, so it may open the inspector).
LOGIN = ("builder", "inspect-the-demo")
SETTINGS_MARK = "# Added by demo/server.py: the demo server's ports, on loopback."
SETTINGS = f"""
{SETTINGS_MARK}
TELNET_PORTS = [{TELNET_PORT}]
TELNET_INTERFACES = ["127.0.0.1"]
WEBSERVER_PORTS = [({WEB_PORT}, {WEB_PORT + 4})]
WEBSERVER_INTERFACES = ["127.0.0.1"]
WEBSOCKET_CLIENT_PORT = {WEB_PORT + 1}
WEBSOCKET_CLIENT_INTERFACE = "127.0.0.1"
AMP_PORT = {WEB_PORT + 5}
SSL_PORTS = [{WEB_PORT + 2}]
SSH_PORTS = [{WEB_PORT + 3}]
"""
URLS_MARK = "# Added by demo/server.py: the evennia-ai web inspector (README, Installation)."
URLS = f"""
{URLS_MARK}
from django.urls import include  # noqa: E402

urlpatterns = [path("ai/", include("ai.web.urls"))] + urlpatterns
"""
COMMANDS_MARK = "Added by demo/server.py (README, Installation)."
# How long the website may take to answer after ``evennia start`` on a loaded machine.
READY_WAIT = 300
START_ATTEMPTS = 3


def _append_once(path, mark, text):
    """Append ``text`` to the file at ``path`` unless ``mark`` is in it already."""
    with open(path, encoding="utf-8") as handle:
        if mark in handle.read():
            return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text)


def _give_characters_the_commands(game_dir):
    """Add the assistant's commands to the characters' cmdset, as the README's Installation
    says (once): so that a player on telnet can ``talk`` to it and a builder ``aihistory``."""
    path = os.path.join(game_dir, "commands", "default_cmdsets.py")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if "AssistantCmdSet" in text:
        return
    creation = "        super().at_cmdset_creation()\n"  # CharacterCmdSet's comes first
    text = text.replace(creation, creation + "        self.add(AssistantCmdSet)\n", 1)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"from ai.commands import AssistantCmdSet  # {COMMANDS_MARK}\n{text}")


def configure(game_dir):
    """Give the game the inspector's URL line, the assistant's commands and the demo
    server's ports (once)."""
    _append_once(os.path.join(game_dir, "server", "conf", "settings.py"), SETTINGS_MARK, SETTINGS)
    _append_once(os.path.join(game_dir, "web", "website", "urls.py"), URLS_MARK, URLS)
    _give_characters_the_commands(game_dir)


def _database(game_dir):
    return os.path.join(game_dir, "server", "evennia.db3")


def _query(game_dir, sql):
    """Return the rows of ``sql`` in the game's database; none when it or the table is
    missing (not migrated yet)."""
    if not os.path.exists(_database(game_dir)):
        return []
    with sqlite3.connect(_database(game_dir)) as connection:
        try:
            return connection.execute(sql).fetchall()
        except sqlite3.OperationalError:
            return []


def compactions_stored(game_dir):
    """Return how many compaction records the game's database holds."""
    return sum(count for (count,) in _query(game_dir, "SELECT count(*) FROM ai_compactionrecord"))


def setup_done(game_dir):
    """Tell whether Evennia's initial setup (Account #1, Limbo) ran to its end."""
    sql = "SELECT db_value FROM server_serverconfig WHERE db_key = 'last_initial_setup_step'"
    # Evennia stores a setting as a pickle in base64, and writes this one itself.
    steps = [pickle.loads(base64.b64decode(value)) for (value,) in _query(game_dir, sql)]
    return any(step in ("done", -1) for step in steps)


def _evennia(game_dir, *args, **variables):
    """Run the venv's ``evennia`` launcher in ``game_dir``, with the venv's commands first
    on ``PATH`` (it starts ``twistd``) and ``variables`` set, and print what it printed;
    return that, or raise when it fails."""
    bin_dir = os.path.dirname(sys.executable)
    path = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    env = dict(os.environ, PATH=path, **variables)
    command = [os.path.join(bin_dir, "evennia"), *args]
    ran = subprocess.run(command, cwd=game_dir, env=env, check=True, capture_output=True, text=True)
    print(ran.stdout + ran.stderr, end="")
    return ran.stdout


def _start(game_dir, **variables):
    """Run ``evennia start``, again when the launcher gave up waiting for the portal (on a
    loaded machine the portal took longer to load than the launcher waits): the portal
    it started runs on, and the second start starts the server beside it."""
    for _ in range(START_ATTEMPTS):
        if "timed out" not in _evennia(game_dir, "start", **variables):
            return
        print("Starting again: the launcher stopped waiting for the portal.")


def website_answers():
    """Tell whether the demo server's website answers."""
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(WEB_URL, timeout=5):
            return True
    except (urllib.error.URLError, OSError):
        return False


def start(game_dir):
    """Play the demo if need be, then start the server and wait for its website."""
    game_dir = os.path.abspath(game_dir)
    if website_answers():
        print(f"The demo server is running already: {WEB_URL}/ai/")
        return 0
    configure(game_dir)
    if not setup_done(game_dir) and not first_start(game_dir):
        return 1
    if not compactions_stored(game_dir):
        print("Playing the demo first, so the assistant has compactions to show...")
        log = os.path.join(game_dir, "demo.log")
        with open(log, "w", encoding="utf-8") as out:
            played = subprocess.run(
                [sys.executable, os.path.join(DEMO_DIR, "play.py"), game_dir], stdout=out
            )
        if played.returncode:
            print(f"The demo failed (exit code {played.returncode}); see {log}.")
            return 1
    _start(game_dir)
    if not wait_for(website_answers, "the website to answer", game_dir):
        return 1
    print(f"Open {WEB_URL}/ai/ and log in as {LOGIN[0]} ({LOGIN[1]}).")
    print(f"Telnet: 127.0.0.1 port {TELNET_PORT}. Stop it: make demo-server-stop")
    return 0


def wait_for(ready, what, game_dir):
    """Poll ``ready()`` each second for up to ``READY_WAIT`` s; say so when it never was."""
    waited = time.monotonic()
    while not ready():
        if time.monotonic() - waited > READY_WAIT:
            print(f"Waited {READY_WAIT} s for {what}; see {game_dir}/server/logs.")
            return False
        time.sleep(1)
    return True


def first_start(game_dir):
    """Start the game once for Evennia's initial setup, which creates the demo's builder
    (Account #1) and Limbo, then stop it; return whether the setup finished. A database
    the demo filled before that setup (``make demo`` first) is started afresh: the setup
    cannot run on it."""
    if compactions_stored(game_dir):
        print("The demo was played before the game's first start: starting it afresh.")
        os.remove(_database(game_dir))
        shutil.rmtree(os.path.join(game_dir, "server", "ai_memory"), ignore_errors=True)
    print("Starting the game once, for Evennia's initial setup...")
    login = {"EVENNIA_SUPERUSER_USERNAME": LOGIN[0], "EVENNIA_SUPERUSER_PASSWORD": LOGIN[1]}
    _evennia(game_dir, "migrate", **login)
    _start(game_dir, **login)
    done = wait_for(lambda: setup_done(game_dir), "Evennia's initial setup", game_dir)
    done = done and wait_for(website_answers, "the website to answer", game_dir)
    stop(game_dir)
    return done


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def running_pids(game_dir):
    """Return the PIDs of the game's server and portal from their pid files, if alive."""
    pids = []
    for name in ("server.pid", "portal.pid"):
        try:
            with open(os.path.join(game_dir, "server", name), encoding="utf-8") as handle:
                pids.append(int(handle.read().strip()))
        except (OSError, ValueError):
            continue
    return [pid for pid in pids if _alive(pid)]


def stop(game_dir):
    """Stop the demo server with ``evennia stop``, then by PID whatever still runs."""
    game_dir = os.path.abspath(game_dir)
    pids = running_pids(game_dir)
    _evennia(game_dir, "stop")
    if not wait_for(lambda: not any(_alive(pid) for pid in pids), "the server to stop", game_dir):
        for pid in filter(_alive, pids):
            print(f"Stopping process {pid} by its PID.")
            os.kill(pid, signal.SIGTERM)
    return 0


def main(argv):
    """Run ``start`` or ``stop``; return the exit code."""
    actions = {"start": start, "stop": stop}
    if len(argv) < 2 or argv[1] not in actions:
        print(__doc__.strip().splitlines()[-1].strip())
        return 2
    return actions[argv[1]](argv[2] if len(argv) > 2 else DEFAULT_GAME_DIR)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
