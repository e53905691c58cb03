"""The URLs of a game's website with the inspector included, as docs/inspector.md says:
Evennia's own (the base template links to them), its admin, and ``ai/``."""

from django.urls import include, path
from evennia.web.urls import urlpatterns as evennia_urlpatterns

urlpatterns = [
    path("ai/", include("ai.web.urls")),
    path("admin/", include("evennia.web.admin.urls")),
    *evennia_urlpatterns,
]
