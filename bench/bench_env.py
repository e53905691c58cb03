"""Shared set-up of the benchmarks: Django and Evennia on a throwaway on-disk SQLite database.

Benchmarks time real database writes, so the database is a file in a temporary directory
rather than ``:memory:``. Evennia's default settings name ``typeclasses.*`` and
``server.conf.*`` modules, which live in its game template; putting the template on
``sys.path`` stands in for a game directory, as in ``ai/tests/settings.py``.
"""

import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
import types

SETTINGS_MODULE = "bench_settings"


def _settings_module(db_path, postgres=None):
    """Return a settings module: Evennia's defaults, this app and the database: the SQLite
    file ``db_path``, or the PostgreSQL connection parameters ``postgres``."""
    import evennia

    sys.path.insert(0, os.path.join(os.path.dirname(evennia.__file__), "game_template"))
    cwd = os.getcwd()
    from evennia import settings_default  # climbs the tree looking for a game directory

    os.chdir(cwd)
    module = types.ModuleType(SETTINGS_MODULE)
    module.__dict__.update({k: v for k, v in vars(settings_default).items() if k.isupper()})
    module.INSTALLED_APPS = settings_default.INSTALLED_APPS + ["ai"]
    module.DATABASES = {
        "default": (
            dict(ENGINE="django.db.backends.postgresql", **postgres)
            if postgres
            else {"ENGINE": "django.db.backends.sqlite3", "NAME": db_path}
        )
    }
    module.AI_MEMORY_DIR = os.path.join(os.path.dirname(db_path), "memory")
    # Logs (the AIlog channel's, lock warnings) beside the database, not into the installed
    # Evennia package's game template, which every `evennia --init` copies.
    module.LOG_DIR = os.path.dirname(db_path)
    for name in ("SERVER", "PORTAL", "HTTP", "LOCKWARNING"):
        default = module.__dict__[f"{name}_LOG_FILE"]
        module.__dict__[f"{name}_LOG_FILE"] = os.path.join(
            module.LOG_DIR, os.path.basename(default)
        )
    return module


def postgres_database(name):
    """Create the database ``name`` anew on the cluster ``scripts/test_postgres.sh`` started
    (its ``AI_TEST_PG_*`` variables) and return its connection parameters, as Django's
    ``DATABASES`` names them."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    server = {
        "HOST": os.environ.get("AI_TEST_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("AI_TEST_PG_PORT", "54329"),
        "USER": os.environ.get("AI_TEST_PG_USER", "postgres"),
    }
    conninfo = make_conninfo(dbname="postgres", **{k.lower(): v for k, v in server.items()})
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    return dict(server, NAME=name)


def setup_evennia(postgres=None):
    """Configure Django and Evennia on a fresh, migrated database: a SQLite file deleted at
    exit, or the PostgreSQL database of ``postgres`` (``postgres_database``'s parameters).

    Returns:
        str: The path of the database file (unused on PostgreSQL).
    """
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    workdir = tempfile.mkdtemp(prefix="evennia-ai-bench-")
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    db_path = os.path.join(workdir, "bench.db3")
    sys.modules[SETTINGS_MODULE] = _settings_module(db_path, postgres)
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS_MODULE

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    if not postgres:
        apply_sqlite_pragmas()

    import evennia

    evennia._init()
    return db_path


def apply_sqlite_pragmas():
    """Run ``SQLITE3_PRAGMAS`` on the connection, as Evennia's server does on its own at
    start (``synchronous=OFF`` among them): a benchmark times the database a game runs."""
    from django.conf import settings
    from django.db import connection

    with connection.cursor() as cursor:
        for pragma in settings.SQLITE3_PRAGMAS:
            cursor.execute(pragma)


def set_journal_mode(mode):
    """Set the SQLite database's journal mode (``delete``, Evennia's default, or ``wal``);
    return the mode in effect, which SQLite leaves unchanged when it cannot switch."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA journal_mode={mode}")
        return cursor.fetchone()[0]


def new_assistant(key="Helper"):
    """Create an AssistantCharacter in a fresh room and return it."""
    from evennia.utils import create

    room = create.create_object(
        "evennia.objects.objects.DefaultRoom", key=f"{key}'s room", nohome=True
    )
    return create.create_object(
        "ai.assistant_character.AssistantCharacter", key=key, location=room, home=room
    )


def median_cpu_ms(call, repeats, warm_up=0):
    """Return the median thread CPU milliseconds of ``repeats`` calls ``call(rep)``, after
    ``warm_up`` untimed ones (``rep`` counts every call, warm-up included)."""
    times = []
    for rep in range(warm_up + repeats):
        started = time.thread_time()
        call(rep)
        times.append((time.thread_time() - started) * 1000)
    return round(statistics.median(times[warm_up:]), 3)
