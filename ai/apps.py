"""Django application configuration for the `ai` contrib."""

from django.apps import AppConfig


class AiConfig(AppConfig):
    """The evennia-ai Django app: it owns the conversation history tables."""

    name = "ai"
    label = "ai"
    verbose_name = "Evennia AI assistant"
    default_auto_field = "django.db.models.BigAutoField"
