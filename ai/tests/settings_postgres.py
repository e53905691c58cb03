"""The test settings on PostgreSQL: ``ai.tests.settings`` with the database of the
throwaway cluster that ``make test-postgres`` starts (``scripts/test_postgres.sh``).

The server is found through ``AI_TEST_PG_HOST``, ``AI_TEST_PG_PORT`` and
``AI_TEST_PG_USER``; Django creates the test database itself and drops it afterwards.
Long-term memory keeps its vectors there too (pgvector), unless ``AI_TEST_PG_VECTOR_STORE``
names another store (the script's answer to a PostgreSQL without pgvector).
"""

import os

from ai.tests.settings import *  # noqa: F401,F403

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "evennia_ai",
        "HOST": os.environ.get("AI_TEST_PG_HOST", "127.0.0.1"),
        "PORT": os.environ.get("AI_TEST_PG_PORT", "54329"),
        "USER": os.environ.get("AI_TEST_PG_USER", "postgres"),
    }
}
AI_MEMORY_VECTOR_STORE = os.environ.get("AI_TEST_PG_VECTOR_STORE") or None
