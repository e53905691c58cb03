"""Django application configuration for the `ai` contrib."""

from django.apps import AppConfig


class AiConfig(AppConfig):
    """The evennia-ai Django app: it owns the conversation history tables."""

    name = "ai"
    label = "ai"
    verbose_name = "Evennia AI assistant"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        """Connect the signals that keep an idle tick's answers and the resolved
        configurations true (see ``ai.helpers.idle_checks``, ``ai.helpers.config_writes``)."""
        from .helpers import config_writes, idle_checks

        idle_checks.connect()
        config_writes.connect()
