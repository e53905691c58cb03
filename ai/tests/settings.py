"""Django settings for running the suite under pytest: Evennia's defaults plus this app.

Evennia's default settings name `typeclasses.*` and `server.conf.*` modules, which live in
the game template; putting the template on `sys.path` stands in for a game directory.
"""

import atexit
import os
import shutil
import sys
import tempfile

import evennia

sys.path.insert(0, os.path.join(os.path.dirname(evennia.__file__), "game_template"))
# Evennia's default settings look for a game directory by changing to each parent
# directory in turn and stay in the last: pytest would then find no `testpaths` there.
_CWD = os.getcwd()
from evennia.settings_default import *  # noqa: E402,F401,F403

os.chdir(_CWD)


def _scratch_directory(prefix):
    """Return a new directory that is removed when the test process exits."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


INSTALLED_APPS = INSTALLED_APPS + ["ai"]  # noqa: F405
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
# Password hashing dominates account set-up in tests; MD5 makes it cheap.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
TEST_ENVIRONMENT = True
# Logs (the AIlog channel's, lock warnings) go to a scratch directory, not into the
# installed Evennia package's game template, which every `evennia --init` copies.
LOG_DIR = _scratch_directory("evennia-ai-test-logs-")
SERVER_LOG_FILE = os.path.join(LOG_DIR, "server.log")
PORTAL_LOG_FILE = os.path.join(LOG_DIR, "portal.log")
HTTP_LOG_FILE = os.path.join(LOG_DIR, "http_requests.log")
LOCKWARNING_LOG_FILE = os.path.join(LOG_DIR, "lockwarnings.log")
# Long-term memory (Mem0's FAISS index and history) in a scratch directory.
AI_MEMORY_DIR = _scratch_directory("evennia-ai-test-memory-")
# Freezing the objects loaded at start is for a server; a test process keeps collecting.
AI_GC_FREEZE = False
