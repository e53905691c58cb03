"""AssistantScript: the assistant's configuration, event queue, modes and tick.

The script ticks every ``AI_TICK_INTERVAL`` seconds. Evennia's ticker does not wait for
the Deferred that ``at_repeat`` returns, so the busy guard is ours: a tick that would
start while the previous one is still running is skipped and counted.
"""

from django.utils import timezone
from evennia.scripts.scripts import DefaultScript
from evennia.utils import logger
from evennia.utils.dbserialize import deserialize
from twisted.internet import defer

from . import event_queue
from .audience import event_audience, with_audience
from .autonomy import pursue_goals
from .config import (
    CROSS_CHECKS,
    EMOTE_FIELD,
    SCRIPT_CONFIG,
    ai_setting,
    check_value,
    default_value,
    resolve_config,
)
from .context_usage import measure_context, with_history_now
from .helpers import config_writes
from .helpers.working_memory import note_conversation
from .history import ConversationHistory
from .llm_interaction import resolve_model
from .log_channel import open_log_channel
from .process_start import call_off_restart, restart_in_turns, start_process
from .prompt_contexts import (
    CONTEXT_TICK_EVENT,
    EXECUTION_CONFIG_DEFAULTS,
    get_context_config,
    token_pressure_level,
)
from .prompt_rendering import render_event
from .reflection import reflect_if_due
from .sleep import run_sleep_tick
from .sleep.common import is_stuck, record_outcome
from .sleep.compaction import compact_conversation_history
from .sleep.escalation import check_window_fits_frame, what_is_too_large
from .sleep.extraction import ExtractionBeforeSummary
from .sleep.record import save_sleep_record
from .task_assessment import assess_task
from .tool_execution import run_react_loop
from .tools.communication import tell_room
from .usage_history import flush_usage, record_tick
from .utils.columns import fitted
from .utils.wording import percent_against, plural

# The event classes of the execution pattern's third layer (seed 004): conversation is one
# action; what changes the world (an object given, a builder's request) runs as a ReAct loop
# with dangerous tools confirmed. An arrival is neither: a ReAct loop, as tick_event allows.
COMMUNICATION_EVENTS = ("speech", "talk", "whisper", "pose")
BUILDING_EVENTS = ("given", "request")
EMERGENCY_EXTRACTION_ITERATIONS = 3

MODES = ("awake", "sleep")
# Sleep phases: dozing (just fell asleep: only a due reflection runs), then dreaming (the
# sleep pipeline).
SLEEP_PHASES = ("dozing", "dreaming")
# What a configuration attribute that was never stored reads as (a stored None is a value).
_UNSET = object()


class AssistantScript(DefaultScript):
    """Drives one AssistantCharacter: holds its settings, hears its events, runs its ticks."""

    def at_script_creation(self):
        self.key = "assistant_script"
        self.desc = "Runs the ticks of an AI assistant"
        self.interval = ai_setting("AI_TICK_INTERVAL")
        self.start_delay = True  # the first tick comes one interval after creation
        self.persistent = True
        for name in SCRIPT_CONFIG:
            self.attributes.add(name, default_value(name))
        self.db.operating_mode = "awake"
        self.db.sleep_phase = None
        self.db.last_compaction = None
        self.db.context_signals = {}
        open_log_channel()

    @property
    def label(self):
        """How logs name this assistant: its character's key and dbref."""
        owner = self.obj or self
        return f"{owner.key}({owner.dbref})"

    # configuration ---------------------------------------------------------------------

    def at_server_start(self):
        """Load what the process shares once (``ai.process_start``). Next to nothing is read
        of the script itself: Evennia calls every script's hook in one loop, and a read costs
        a query per script on a cold cache (``bench/startup.py``)."""
        start_process(self)

    def _unpause_task(self, *args, auto_unpause=False, **kwargs):
        """Restart the timer a reload or shutdown paused (or a kill left stopped).

        Evennia's start loop restarts every script's timer in one go, a dozen queries
        each (with 50 assistants, half a second in which nothing else runs;
        ``bench/startup.py``): from that loop, the restart waits its turn
        (``ai.process_start.restart_in_turns``). Any other unpause is Evennia's own.
        """
        if auto_unpause and self.ndb._task is None and not args and not kwargs:
            restart_in_turns(self, super()._unpause_task)
        else:
            super()._unpause_task(*args, auto_unpause=auto_unpause, **kwargs)

    def _pause_task(self, auto_pause=False, **kwargs):
        """Pause the timer, calling off a restart still waiting for its turn: the pause the
        reload left stands (Evennia pauses only a timer not paused), a builder's as one."""
        if call_off_restart(self) and not auto_pause:
            self.db._manually_paused = True
        super()._pause_task(auto_pause=auto_pause, **kwargs)

    def at_server_reload(self):
        """Write what waits in memory: the usage rows (``ai.usage_history``) and the sleep's
        record (``ai.sleep.record``)."""
        flush_usage(self)
        save_sleep_record(self)

    def at_server_shutdown(self):
        """Write what waits in memory, as :meth:`at_server_reload` does."""
        flush_usage(self)
        save_sleep_record(self)

    def set_config(self, name, value):
        """Validate and store one configuration attribute.

        Raises:
            ConfigError: naming the attribute and its allowed range; nothing is stored.
        """
        check_value(name, value)
        if name == "max_context_tokens":
            check_window_fits_frame(self, value)
        for names, check, _ in CROSS_CHECKS:
            if name in names:
                pending = {other: self.get_config(other) for other in names}
                pending[name] = value
                check(*(pending[other] for other in names))
        self.attributes.add(name, value)

    def effective_config(self):
        """Return the usable configuration, logging (once each) any refused stored value.

        Resolved once and kept until a configuration attribute is written (reading every
        attribute costs about a millisecond, and a tick asks a dozen times; see
        ``ai.helpers.config_writes``). The configuration returned is shared: never change it.
        """
        kept = self.ndb.kept_config
        if kept is not None and kept[0] == config_writes.generation():
            return kept[1]
        resolved_at = config_writes.generation()
        stored = {}
        for name in SCRIPT_CONFIG:
            value = self.attributes.get(name, default=_UNSET)
            if value is not _UNSET:
                stored[name] = deserialize(value)
        config, problems = resolve_config(stored)
        reported = self.ndb.reported_config_problems or set()
        for problem in problems:
            if problem not in reported:
                logger.log_err(f"AI {self.label}: {problem}")
                reported.add(problem)
        self.ndb.reported_config_problems = reported
        self.ndb.kept_config = (resolved_at, config)
        return config

    def get_config(self, name):
        """Return one usable configuration value (the default if the stored one is invalid)."""
        return self.effective_config()[name]

    # history ---------------------------------------------------------------------------

    @property
    def history(self):
        """The history store, counting tokens with the assistant's current model."""
        return ConversationHistory(self, resolve_model(self))

    @property
    def conversation_history(self):
        """The live conversation history as ``{role, content, ...}`` dicts, oldest first."""
        return self.history.messages()

    def append_message(self, message):
        """Validate and append one message to the history (raises on a malformed one)."""
        return self.history.append(message)

    # events and modes ------------------------------------------------------------------

    def queue_event(self, event):
        """Queue an event (a dict with at least ``type``) for the next tick; beyond
        ``AI_MAX_PENDING_EVENTS`` the oldest are dropped (``ai.event_queue``)."""
        event_queue.queue_event(self, event, ai_setting("AI_MAX_PENDING_EVENTS"))

    def pop_event(self, handle=None):
        """Remove and return the oldest pending event, or None; with ``handle``, return what
        it makes of the event in the transaction that removes it (``ai.event_queue``)."""
        return event_queue.pop_event(self, handle)

    def has_pending_events(self):
        """Tell whether an event waits for a tick."""
        return event_queue.has_pending_events(self)

    def pending_events(self):
        """Return the events waiting for a tick, oldest first."""
        return event_queue.pending_events(self)

    def fall_asleep(self, reason="idle"):
        """Switch to sleep mode (phase ``dozing``) and tell the room."""
        if self.db.operating_mode == "sleep":
            return
        self.db.operating_mode = "sleep"
        self.db.sleep_phase = SLEEP_PHASES[0]
        self.db.asleep_since = timezone.now().isoformat()  # the sleep that ai.sleep.record keeps
        self.ndb.idle_ticks = 0
        logger.log_info(f"AI {self.label}: falls asleep ({reason})")
        self.tell_room("sleep_emote")

    def wake_up(self, reason="event"):
        """Switch to awake mode and tell the room."""
        if self.db.operating_mode == "awake":
            return
        self.db.operating_mode = "awake"
        self.db.sleep_phase = None
        save_sleep_record(self)
        self.ndb.idle_ticks = 0
        logger.log_info(f"AI {self.label}: wakes up ({reason})")
        self.tell_room("wake_emote")

    @property
    def state(self):
        """What the assistant is doing: ``awake``, or its sleep phase (``dozing``, then
        ``dreaming``)."""
        if self.db.operating_mode != "sleep":
            return MODES[0]
        return self.db.sleep_phase or SLEEP_PHASES[0]

    def tell_room(self, emote):
        """Show the room the emote template of the attribute ``emote``, unless it is None."""
        template = self.get_config(emote)
        if template and self.obj and self.obj.location:
            tell_room(self.obj.location, fitted(template.replace(EMOTE_FIELD, self.obj.key)))

    def context_usage(self):
        """Measure the context of the next call (see ``measure_context``)."""
        return measure_context(self, self.obj)

    # the tick --------------------------------------------------------------------------

    def at_repeat(self, **kwargs):
        """Start a tick unless one is still running; return the tick's Deferred."""
        if self.ndb.tick_running:
            self.ndb.skipped_ticks = (self.ndb.skipped_ticks or 0) + 1
            logger.log_info(
                f"AI {self.label}: tick skipped, previous still running "
                f"({self.ndb.skipped_ticks} skipped)"
            )
            return None
        self.ndb.tick_running = True
        ticking = defer.maybeDeferred(self.run_tick)
        ticking.addErrback(self._log_tick_failure)
        ticking.addBoth(self._end_tick)
        return ticking

    def _log_tick_failure(self, failure):
        logger.log_trace(f"AI {self.label}: tick failed: {failure.getErrorMessage()}")
        return {"status": "error", "error": failure.getErrorMessage()}

    def _end_tick(self, result):
        self.ndb.tick_running = False
        try:
            record_tick(self, result, self.effective_config())
        except Exception:  # a row of the usage chart is never worth a failed tick
            logger.log_trace(f"AI {self.label}: the tick's usage was not recorded")
        self.ndb.last_tick = result
        return result

    @defer.inlineCallbacks
    def run_tick(self):
        """Run one tick in the current mode.

        Returns:
            Deferred: Fires with a dict describing the tick (``status``, ``mode``, ...).
        """
        character = self.obj
        if character is None:
            return {"status": "no_character"}
        config = self.effective_config()
        if self.db.operating_mode == "sleep":
            if not self.has_pending_events():
                result = yield self.sleep_tick(character, config)
                return result
            self.wake_up("a player spoke")
        result = yield self.awake_tick(character, config)
        return result

    @defer.inlineCallbacks
    def sleep_tick(self, character, config):
        """Advance the sleep phases: dozing (a reflection, if one is due), then dreaming (the
        sleep pipeline)."""
        if self.db.sleep_phase != "dreaming":
            self.db.sleep_phase = "dreaming"
            reflection = yield reflect_if_due(self, character, config)
            return {"status": "slept", "mode": "sleep", "phase": "dozing", "reflection": reflection}
        memory = yield run_sleep_tick(self, character)
        return {"status": "slept", "mode": "sleep", "phase": "dreaming", "memory": memory}

    @defer.inlineCallbacks
    def emergency_compaction(self, character, config, usage=None):
        """Compact now if the next call would reach ``compact_emergency_threshold``.

        A compaction that could not bring usage under the threshold is not retried until
        the history changes, so an oversized preserved message cannot cause a loop.

        Args:
            usage (ContextUsage, optional): The context as measured now; measured if None.

        Returns:
            Deferred: Fires with None when not needed, else the extraction and compaction
            results and whether usage is still over the threshold.
        """
        if not config["compact_enabled"]:
            return None
        usage = usage or self.context_usage()
        threshold = config["compact_emergency_threshold"]
        if not usage.message_count or usage.usage < threshold:
            return None
        if is_stuck(self, "emergency"):
            return {"skipped": True, "reason": "still over the threshold, history unchanged"}
        logger.log_warn(
            f"AI {self.label}: Emergency compaction triggered: "
            f"{percent_against(usage.usage, threshold, places=0)} context usage"
        )
        extraction = ExtractionBeforeSummary(
            self, character, max_iterations=EMERGENCY_EXTRACTION_ITERATIONS
        )
        compaction = yield compact_conversation_history(
            self, character, force=True, extract=extraction
        )
        after = self.context_usage()
        still_over = after.usage >= threshold
        record_outcome(self, "emergency", still_over)
        if still_over:
            logger.log_warn(
                f"AI {self.label}: still at {percent_against(after.usage, threshold, places=0)} "
                "after emergency compaction "
                f"({what_is_too_large(after, threshold, compaction)}); going on"
            )
        return {
            "pre_compaction_extraction": extraction.result,
            "context_compaction": compaction,
            "still_over_threshold": still_over,
        }

    @defer.inlineCallbacks
    def awake_tick(self, character, config):
        """Compact first if the context is nearly full, then handle the next pending event;
        with none, reflect if a reflection is due, else pursue the goals (``ai.autonomy``).

        The context is measured once: the turn's signals reuse that measure unless a
        compaction changed the history."""
        usage = self.context_usage() if config["compact_enabled"] else None
        emergency = yield self.emergency_compaction(character, config, usage)
        heard = self.pop_event(lambda event: self.hear(character, event, config))
        if heard is None:
            # A due reflection comes first: it reads what the turns before it journaled,
            # and it is not idleness (the tick does not count toward sleep).
            reflection = yield reflect_if_due(self, character, config)
            if reflection:
                return dict(reflection, mode="awake", emergency=emergency)
            # Otherwise the tick is idle, whatever autonomy does in it: an assistant with
            # goals still falls asleep (see ai.autonomy).
            self.ndb.idle_ticks = (self.ndb.idle_ticks or 0) + 1
            limit = config["sleep_after_idle_ticks"]
            if limit and self.ndb.idle_ticks >= limit:
                self.fall_asleep(plural(self.ndb.idle_ticks, "idle tick"))
                return {"status": "idle", "mode": "awake", "emergency": emergency}
            pursued = yield pursue_goals(self, character, config)
            return dict(pursued or {"status": "idle"}, mode="awake", emergency=emergency)
        self.ndb.idle_ticks = 0
        event, stored = heard
        event = dict(event, in_history=True, message_id=stored["id"])
        assessment = yield self.assess(event, config)
        loop = yield run_react_loop(
            self,
            character,
            CONTEXT_TICK_EVENT,
            event=event,
            signals=self.context_signals(event, None if emergency else usage),
            source_message_ids=[stored["id"]],
            assessment=assessment,
        )
        outcome = {
            "mode": "awake",
            "event": event,
            "assessment": assessment,
            "loop": loop,
            "llm": loop.last_answer,
            "emergency": emergency,
        }
        if loop.stop_reason in ("llm_error", "over_window"):
            self.ndb.consecutive_errors = (self.ndb.consecutive_errors or 0) + 1
            if character.location:
                tell_room(
                    character.location,
                    fitted(f"{character.key} frowns, lost in thought, and does not answer."),
                )
            return dict(outcome, status=loop.stop_reason)
        self.ndb.consecutive_errors = 0
        return dict(outcome, status="replied" if loop.said else "acted", reply=" ".join(loop.said))

    def hear(self, character, event, config):
        """Put an event's line in history and its note in working memory.

        Returns:
            tuple: The event and the stored message.
        """
        stored = self.append_message(
            {
                "role": "user",
                "content": render_event(event),
                "metadata": with_audience(
                    {"event": event.get("type"), "speaker": event.get("speaker")},
                    event_audience(event),
                ),
            }
        )
        note_conversation(character, event, config["working_memory_ttl"])
        return event, stored

    def assess(self, event, config):
        """Ask the model to assess a turn that is not plain conversation, when
        ``task_assessment_enabled`` (``ai.task_assessment``); off, nothing is called.

        Returns:
            Deferred: Fires with the assessment, or None.
        """
        execution = config["execution_config"]
        if event.get("type") in COMMUNICATION_EVENTS or not execution.get(
            "task_assessment_enabled"
        ):
            return defer.succeed(None)
        limit = min(
            execution.get(
                "max_iterations_per_tick", EXECUTION_CONFIG_DEFAULTS["max_iterations_per_tick"]
            ),
            get_context_config(CONTEXT_TICK_EVENT, self).max_iterations,
        )
        return assess_task(self, event, limit)

    def context_signals(self, event=None, usage=None):
        """Return the runtime signals of the execution pattern's third layer.

        Args:
            event (dict, optional): The event of the turn.
            usage (ContextUsage, optional): The context measured earlier in this tick, its
                history since grown by the event (``with_history_now``); measured if None.
        """
        signals = dict(self.db.context_signals or {})
        # An extraction runs in this process or not at all: one cut short by a reload
        # leaves nothing set.
        signals["pre_compaction"] = bool(self.ndb.extracting)
        usage = with_history_now(self, usage) if usage else self.context_usage()
        signals["token_pressure"] = token_pressure_level(usage.usage)
        signals["recent_errors"] = self.ndb.consecutive_errors or 0
        kind = (event or {}).get("type")
        if kind in COMMUNICATION_EVENTS:
            signals["event_class"] = "communication"
        elif kind in BUILDING_EVENTS:
            signals["event_class"] = "building"
        return signals
