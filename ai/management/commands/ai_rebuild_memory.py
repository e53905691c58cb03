"""``evennia ai_rebuild_memory``: fill the vector store from the contrib's memory tables."""

from django.core.management.base import BaseCommand, CommandError

from ai.semantic_memory import (
    MemoryStoreError,
    close_memory,
    memory_config,
    open_memory,
    rebuild_memories,
)


class Command(BaseCommand):
    help = (
        "Add every long-term memory of the contrib's tables that the configured vector store "
        "lacks (after AI_MEMORY_VECTOR_STORE changed), and say how many it moved. With FAISS, "
        "run it while the server is stopped: its index is one process's."
    )

    def handle(self, *args, **options):
        try:
            config = memory_config()
            memory = open_memory(config)
        except MemoryStoreError as err:
            raise CommandError(str(err)) from err
        try:
            added, kept = rebuild_memories(memory)
        finally:
            close_memory(memory)
        store = config.get("vector_store", {}).get("provider", "Mem0's default store")
        self.stdout.write(
            f"Moved {added} long-term memories into {store}; {kept} were there already."
        )
