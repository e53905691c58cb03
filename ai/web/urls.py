"""The inspector's URLs, under the prefix a game includes them at (``ai/`` in the docs)."""

from django.urls import path

from . import views

app_name = "ai"

urlpatterns = [
    path("", views.AssistantListView.as_view(), name="assistants"),
    path("<int:pk>/", views.AssistantDetailView.as_view(), name="assistant"),
    path("<int:pk>/json/", views.AssistantJsonView.as_view(), name="assistant-json"),
    path("<int:pk>/undo/", views.UndoCompactionView.as_view(), name="undo"),
]
