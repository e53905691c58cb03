"""Where long-term memory keeps its vectors (``AI_MEMORY_VECTOR_STORE``), a store that
cannot be used, and ``ai_rebuild_memory`` after a game switched stores."""

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from io import StringIO
from unittest import skipIf, skipUnless
from unittest.mock import patch

from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from ai.helpers.journal import add_entry
from ai.models import MemoryLink
from ai.semantic_memory import (
    WORKER,
    MemoryStoreError,
    add_memory,
    memory_config,
    recall,
    search_memories,
    vector_store,
)
from ai.sleep.consolidation import consolidate_memories_to_semantic

from .support import AssistantTestCase, wait_for

ON_POSTGRESQL = connection.vendor == "postgresql"
HAS_PSYCOPG = importlib.util.find_spec("psycopg") is not None


def closed_port():
    """Return a loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class TestChoosingTheStore(AssistantTestCase):
    @override_settings(AI_MEMORY_VECTOR_STORE=None)
    def test_the_store_follows_the_database(self):
        expected = "pgvector" if ON_POSTGRESQL else "faiss"
        self.assertEqual(vector_store(), expected)
        self.assertEqual(memory_config()["vector_store"]["provider"], expected)

    @skipUnless(ON_POSTGRESQL, "pgvector lives in the game's PostgreSQL database")
    @override_settings(AI_MEMORY_VECTOR_STORE="pgvector")
    def test_pgvector_is_the_games_database_with_an_hnsw_index_of_384_dimensions(self):
        store = memory_config()["vector_store"]["config"]
        self.assertIn(f"dbname={connection.settings_dict['NAME']}", store["connection_string"])
        self.assertEqual((store["embedding_model_dims"], store["hnsw"]), (384, True))

    def test_a_bad_value_is_named_and_the_databases_store_used(self):
        with override_settings(AI_MEMORY_VECTOR_STORE="qdrant"):
            with patch("ai.utils.checked_settings.logger.log_err") as log_err:
                store = vector_store()
        self.assertEqual(store, "pgvector" if ON_POSTGRESQL else "faiss")
        self.assertIn(
            "AI: setting AI_MEMORY_VECTOR_STORE='qdrant' refused: must be one of 'faiss', "
            "'pgvector'; using the default None",
            log_err.call_args.args[0],
        )

    @skipIf(ON_POSTGRESQL, "the game's database here is PostgreSQL")
    @override_settings(AI_MEMORY_VECTOR_STORE="pgvector")
    def test_pgvector_without_postgresql_is_refused_and_the_assistant_still_answers(self):
        with self.assertRaisesRegex(
            MemoryStoreError,
            r"^AI_MEMORY_VECTOR_STORE='pgvector' needs the game's database to be PostgreSQL; "
            r"it is django\.db\.backends\.sqlite3",
        ):
            memory_config()
        with patch("ai.tool_execution.logger.log_err") as log_err:
            result = self.tick_on("The mill opens at dawn.", text="When does the mill open?")
        self.assertEqual(result["status"], "replied")
        self.assertIn("long-term memory did not answer", log_err.call_args.args[0])


@skipUnless(HAS_PSYCOPG, "pgvector needs psycopg (the postgres extra)")
class TestUnreachableDatabase(AssistantTestCase):
    def test_an_unreachable_database_fails_clearly_and_the_assistant_still_answers(self):
        conninfo = f"host=127.0.0.1 port={closed_port()} dbname=game user=game"
        store = {"provider": "pgvector", "config": {"connection_string": conninfo}}
        with override_settings(AI_MEMORY_CONFIG={"vector_store": store}):
            with self.assertRaisesRegex(
                MemoryStoreError, r"^long-term memory cannot reach PostgreSQL database 'game': "
            ):
                wait_for(recall(self.assistant, "the mill", None, 3))
            with patch("ai.tool_execution.logger.log_err") as log_err:
                result = self.tick_on("The mill opens at dawn.", text="When does the mill open?")
        self.assertEqual(result["status"], "replied")
        self.assertIn("cannot reach PostgreSQL database", log_err.call_args.args[0])


class TestRebuild(AssistantTestCase):
    """The memories made on the game's store, moved into FAISS in an empty directory."""

    def setUp(self):
        super().setUp()
        for fact in ("Dana said the gate password is swordfish.", "Bob runs the forge."):
            add_entry(self.assistant, fact, "conversation")
        wait_for(consolidate_memories_to_semantic(self.script, self.assistant, 20))
        self.old_ids = set(MemoryLink.objects.values_list("memory_id", flat=True))
        folder = tempfile.mkdtemp(prefix="ai-rebuilt-")
        self.addCleanup(shutil.rmtree, folder)
        self.switched = override_settings(AI_MEMORY_VECTOR_STORE="faiss", AI_MEMORY_DIR=folder)
        self.switched.enable()
        self.addCleanup(self.switched.disable)

    def rebuild(self):
        out = StringIO()
        call_command("ai_rebuild_memory", stdout=out)
        return out.getvalue().strip()

    def test_the_new_store_gets_every_memory_and_recalls_it(self):
        self.assertEqual(wait_for(recall(self.assistant, "What opens the gate?", None, 3)), [])
        wait_for(WORKER.close())  # a FAISS index is one process's: the server is stopped
        self.assertEqual(
            self.rebuild(), "Moved 2 long-term memories into faiss; 0 were there already."
        )
        found = wait_for(recall(self.assistant, "What opens the gate?", None, 3))
        self.assertIn("swordfish", found[0]["text"])
        new_ids = set(MemoryLink.objects.values_list("memory_id", flat=True))
        self.assertFalse(new_ids & self.old_ids, "the links name the new store's memories")

    def test_a_second_run_moves_nothing(self):
        self.rebuild()
        self.assertEqual(
            self.rebuild(), "Moved 0 long-term memories into faiss; 2 were there already."
        )

    @skipIf(ON_POSTGRESQL, "pgvector can be used here")
    @override_settings(AI_MEMORY_VECTOR_STORE="pgvector")
    def test_a_store_that_cannot_be_used_is_named(self):
        with self.assertRaisesRegex(CommandError, "needs the game's database to be PostgreSQL"):
            self.rebuild()
        self.assertEqual(set(MemoryLink.objects.values_list("memory_id", flat=True)), self.old_ids)


# A second process on the same store: searches what the first added, and adds its own.
OTHER_PROCESS = """
import json, sys
import django
django.setup()
from ai.semantic_memory import add_memory, close_memory, open_memory, search_memories
config, namespace = json.load(sys.stdin)
memory = open_memory(config)
found = search_memories(memory, namespace, "What opens the gate?", 1)
add_memory(memory, namespace, "Bob runs the forge.", {"link": "0", "entry": "", "audience": ""})
close_memory(memory)
print(json.dumps([text for _, text, _ in found]))
"""


@skipUnless(ON_POSTGRESQL and HAS_PSYCOPG, "one memory for two processes is pgvector's")
@override_settings(AI_MEMORY_VECTOR_STORE="pgvector")
class TestTwoProcesses(AssistantTestCase):
    def test_two_processes_on_one_database_see_each_others_memories(self):
        namespace = f"two-processes-{self.assistant.id}"
        metadata = {"link": "0", "entry": "", "audience": ""}
        said = "Dana said the gate password is swordfish."
        wait_for(WORKER.call(add_memory, namespace, said, metadata))
        other = subprocess.run(
            [sys.executable, "-c", OTHER_PROCESS],
            input=json.dumps([memory_config(), namespace]),
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "ai.tests.settings_postgres"},
        )
        self.assertEqual(json.loads(other.stdout.splitlines()[-1]), [said])
        found = wait_for(WORKER.call(search_memories, namespace, "Who runs the forge?", 1))
        self.assertEqual([text for _, text, _ in found], ["Bob runs the forge."])
