"""Text that fits a client's width.

Evennia does not wrap what it sends; a line wider than the client breaks wherever the
client likes, through a table or mid-word. Clients are ``CLIENT_DEFAULT_WIDTH`` columns
wide (78) unless they tell their own width; everything the contrib sends is wrapped here
to one or the other.

A leaf module: Evennia and the standard library only, nothing from the ``ai`` package.
"""

from textwrap import wrap

from django.conf import settings
from evennia.utils.utils import display_len

# How far the further lines of a wrapped item are indented.
INDENT = "    "


def fitted(text, width=None, indent=""):
    """Return ``text`` with every line wider than ``width`` columns wrapped at spaces.

    A line that fits stays as it is, so a table built to the width passes whole. A wrapped
    line's further lines start with its own leading spaces and ``indent``. Lines break at
    spaces, never at a name's hyphens; only a word longer than the width (a long value) is
    cut across lines.

    Args:
        text (str): One or more lines; Evennia markup takes no column.
        width (int, optional): The client's width; ``CLIENT_DEFAULT_WIDTH`` by default.
        indent (str): What further lines of a wrapped line start with, after its own
            leading spaces.
    """
    width = width or settings.CLIENT_DEFAULT_WIDTH
    lines = []
    for line in str(text).split("\n"):
        if display_len(line) <= width:
            lines.append(line)
            continue
        # Markup counts here, so a wrapped line may end before the width, never past it.
        lead = line[: len(line) - len(line.lstrip(" "))]
        lines += wrap(line, width, subsequent_indent=lead + indent, break_on_hyphens=False)
    return "\n".join(lines)


def after_prefix(text, prefix, width=None):
    """Return ``text`` fitted to follow ``prefix`` on its first line (as a channel's name
    does), its further lines indented to start under the text.

    Args:
        text (str): One or more lines.
        prefix (str): What the first line is shown after (``[AIlog] ``).
        width (int, optional): The client's width; ``CLIENT_DEFAULT_WIDTH`` by default.
    """
    pad = " " * display_len(prefix)
    lines = fitted("\n".join(pad + line for line in str(text).split("\n")), width)
    return lines[len(pad) :]
