"""Builders' commands that set an assistant up: its configuration and its operating mode."""

from difflib import get_close_matches
from functools import partial
from pprint import pformat
from textwrap import wrap as wrap_text

from evennia.utils.ansi import raw

from ..config import SCRIPT_CONFIG, ConfigError, parse_value
from ..llm_interaction import model_problem
from .common import INDENT, AssistantCommand, find_assistant, shortened

# A word keeps its hyphen whole ("sub-agents"), as everywhere the contrib wraps.
wrap = partial(wrap_text, break_on_hyphens=False)


class CmdAiMode(AssistantCommand):
    """
    Show or switch an assistant's operating mode.

    Usage:
      aimode <assistant>
      aimode <assistant> = awake|sleep

    An assistant asleep runs its memory work (the sleep pipeline) and wakes when a
    player speaks to it. When its model cannot answer until its configuration
    changes (a key missing or refused, an option refused), it says why.

    Examples:
      aimode helper
      aimode helper = sleep
    """

    key = "aimode"
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        assistant = find_assistant(self.caller, self.lhs.strip())
        if assistant is None:
            return
        script = assistant.assistant_script
        if self.rhs:
            mode = self.rhs.strip().lower()
            if mode == "sleep":
                script.fall_asleep(f"put to sleep by {self.caller.key}")
            elif mode == "awake":
                script.wake_up(f"woken by {self.caller.key}")
            else:
                self.tell(f"Unknown mode '{mode}': use awake or sleep.")
                return
        state = script.state
        self.tell(f"{assistant.key} is {'awake' if state == 'awake' else f'asleep ({state})'}.")
        problem = model_problem(script)
        if problem:
            self.tell(f"It cannot answer: {problem}")


def in_full(label, value, width):
    """Return ``label`` and the whole of ``value`` within ``width`` columns.

    A value whose repr fits follows the label on its line; a longer one goes on indented
    lines below it: text as it is, any other value pretty-printed, long lines wrapped.
    """
    if len(label) + len(repr(value)) <= width:
        return raw(label + repr(value))
    if not isinstance(value, str):
        value = pformat(value, width=width - len(INDENT), sort_dicts=False)
    lines = [label.rstrip()]
    for line in value.splitlines():
        lines += wrap(line, width, initial_indent=INDENT, subsequent_indent=INDENT) or [""]
    return raw("\n".join(lines))


class CmdAiConfig(AssistantCommand):
    """
    Show or change an assistant's configuration.

    Usage:
      aiconfig <assistant>
      aiconfig <assistant>/<attribute>
      aiconfig <assistant>/<attribute> = <value>

    The first form lists every attribute, its value (a long one cut with …)
    and its meaning. The second shows one attribute in full, with its default
    and what it allows. The third changes it: give yes or no (true/false,
    on/off) for a switch, plain text for a model name or a prompt (None for
    none), a number, or a Python literal such as {'temperature': 0.3}. A value
    out of range is refused with the allowed range, and nothing changes.

    Examples:
      aiconfig helper
      aiconfig helper/llm_options
      aiconfig helper/compact_sleep_threshold = 0.6
      aiconfig helper/compact_enabled = no
      aiconfig helper/llm_model = openai/gpt-4o-mini
    """

    key = "aiconfig"
    locks = "cmd:perm(Builder)"
    help_category = "AI"

    def func(self):
        name, _, attribute = self.lhs.partition("/")
        assistant = find_assistant(self.caller, name.strip())
        if assistant is None:
            return
        script = assistant.assistant_script
        attribute = attribute.strip()
        if not attribute:
            if self.rhs is None:
                self.tell(self.listing(assistant, script.effective_config()))
            else:
                self.tell("Usage: aiconfig <assistant>/<attribute> = <value>")
            return
        if attribute not in SCRIPT_CONFIG:
            close = get_close_matches(attribute.lower(), SCRIPT_CONFIG, n=3)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            self.tell(
                f"{assistant.key} has no configuration attribute {attribute!r}.{hint} "
                f"aiconfig {assistant.key} lists them all."
            )
            return
        if self.rhs is None:
            self.tell(self.in_detail(assistant, attribute, script.get_config(attribute)))
            return
        try:
            value = parse_value(attribute, self.rhs)
            script.set_config(attribute, value)
        except ConfigError as err:
            self.tell(raw(f"{err}; nothing changed."))
            return
        self.tell(in_full(f"{assistant.key}: {attribute} = ", value, self.client_width()))

    def listing(self, assistant, config):
        """Return every attribute as ``name = value`` (cut to one line) over its meaning."""
        width = self.client_width()
        lines = wrap(
            f"Configuration of {assistant.key} (aiconfig {assistant.key}/<attribute> shows "
            "one in full, with its default and what it allows):",
            width,
        )
        for name, option in SCRIPT_CONFIG.items():
            value = shortened(repr(config[name]), width - len(f"{name} = "))
            lines.append(f"|w{name}|n = {raw(value)}")
            lines += wrap(
                option.description, width, initial_indent=INDENT, subsequent_indent=INDENT
            )
        return "\n".join(lines)

    def in_detail(self, assistant, name, value):
        """Return one attribute's value and default in full, what it allows and its meaning."""
        width = self.client_width()
        option = SCRIPT_CONFIG[name]
        lines = [
            in_full(f"{assistant.key}/{name} = ", value, width),
            in_full("default: ", option.default, width),
            *wrap(f"allowed: {option.allowed}", width, subsequent_indent=INDENT),
            *wrap(f"meaning: {option.description}", width, subsequent_indent=INDENT),
        ]
        return "\n".join(lines)
