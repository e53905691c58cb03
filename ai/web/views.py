"""The inspector's views: the list of assistants, one assistant's page and JSON, and undo.

Only builders see them (the Builder permission or above, staff, superusers). An anonymous
visitor is sent to the login page; anyone else gets 403 (the JSON endpoint answers 403 with
a JSON body to both, as a script reading it follows no login page).
"""

from django.contrib import messages
from django.contrib.auth.mixins import UserPassesTestMixin
from django.http import Http404, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views import View
from django.views.generic import TemplateView
from twisted.internet import reactor
from twisted.internet.threads import blockingCallFromThread
from twisted.python.threadable import isInIOThread

from ..assistant_character import AssistantCharacter
from ..commands.compaction import compaction_running, undo_report
from ..sleep.undo import UndoRefused, last_compaction, undo_last_compaction
from ..usage_chart import assistant_usage_chart
from .inspection import CHARTED, LISTED, assistant_row, inspect_assistant


def is_builder(user):
    """Tell whether a website user may inspect assistants."""
    return user.is_authenticated and (
        user.is_superuser or user.is_staff or user.check_permstring("Builder")
    )


def get_assistant(pk):
    """Return the assistant (of any subclass) with id ``pk``, or raise 404."""
    assistant = AssistantCharacter.objects.filter_family(id=pk).first()
    if assistant is None or assistant.assistant_script is None:
        raise Http404("No such assistant.")
    return assistant


class BuilderOnly(UserPassesTestMixin):
    """Builders only: others are sent to log in (anonymous) or refused (403)."""

    def test_func(self):
        return is_builder(self.request.user)


class AssistantListView(BuilderOnly, TemplateView):
    """Every assistant: its room, state, context usage, last compaction and what it keeps."""

    template_name = "ai/assistant_list.html"

    def get_context_data(self, **kwargs):
        assistants = AssistantCharacter.objects.all_family().order_by("id")
        return super().get_context_data(
            page_title="AI assistants", assistants=[assistant_row(a) for a in assistants], **kwargs
        )


class AssistantDetailView(BuilderOnly, TemplateView):
    """One assistant's page: everything ``inspect_assistant`` gathers."""

    template_name = "ai/assistant_detail.html"

    def get_context_data(self, **kwargs):
        assistant = get_assistant(kwargs["pk"])
        return super().get_context_data(
            page_title=f"AI assistant {assistant.key}",
            assistant=inspect_assistant(assistant),
            listed=LISTED,
            # Drawn by ai.usage_chart, which escapes every text it writes.
            usage_chart=mark_safe(assistant_usage_chart(assistant.assistant_script, CHARTED)),
            **kwargs,
        )


class AssistantJsonView(BuilderOnly, View):
    """One assistant's page as JSON (read-only)."""

    def handle_no_permission(self):
        return JsonResponse({"error": "Only builders may inspect assistants."}, status=403)

    def get(self, request, pk):
        return JsonResponse(inspect_assistant(get_assistant(pk)))


def undo(script, assistant, record_id, force, by):
    """Undo the last compaction of ``script`` if it is still compaction ``record_id``.

    Returns:
        dict: ``undo_last_compaction``'s result.

    Raises:
        UndoRefused: saying why nothing changed.
    """
    if compaction_running(script):
        raise UndoRefused(f"{assistant.key} is compacting; wait until it is done")
    last = last_compaction(script)
    if last is not None and last.id != record_id:
        raise UndoRefused(f"the last compaction is now #{last.id}, not #{record_id}: see it first")
    return undo_last_compaction(script, assistant, force=force, by=by)


def in_reactor(function, *args, **kwargs):
    """Call ``function`` in the reactor thread and wait for it, when called from another
    thread of a running reactor (the website's thread pool); else call it here (tests)."""
    if reactor.running and not isInIOThread():
        return blockingCallFromThread(reactor, function, *args, **kwargs)
    return function(*args, **kwargs)


class UndoCompactionView(BuilderOnly, View):
    """Undo an assistant's last compaction (POST only), then go back to its page saying
    what happened, or why nothing did."""

    http_method_names = ["post"]

    def post(self, request, pk):
        assistant = get_assistant(pk)
        script = assistant.assistant_script
        record_id = request.POST.get("record", "")
        force = request.POST.get("force") == "on"
        page = reverse("ai:assistant", args=[assistant.id])
        if not record_id.isdigit():
            messages.error(request, "No compaction was named to undo.")
            return redirect(page)
        try:
            # The same work as aicompact/undo, in the reactor thread as the command's: it
            # posts on the log channel, which sends to connected sessions.
            done = in_reactor(
                undo, script, assistant, int(record_id), force, by=request.user.username
            )
        except UndoRefused as err:
            hint = " Tick 'even if it compacts again' to undo anyway." if err.forceable else ""
            messages.warning(request, f"{assistant.key}: {err}.{hint}")
            return redirect(page)
        messages.success(request, undo_report(assistant, done))
        return redirect(page)
