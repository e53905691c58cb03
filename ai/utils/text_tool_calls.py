"""Tool calls that a model wrote into its text, turned into real OpenAI-style tool calls.

Small local models (Qwen2.5-Coder-1.5B behind llama.cpp with a plain chat template, for
instance) often answer a request that offered tools with the call written out as text: a
fenced JSON block, a bare or double-braced JSON object, a Hermes ``<tool_call>`` tag,
``say(message="hi")``, or an XML-ish ``<function=say>`` block. :func:`extract_tool_calls`
recognises those forms, checks them against the offered schemas and returns the calls with
the prose that remains; :func:`looks_like_markup` tells whether some text is still markup
that players must never hear.

A leaf module: standard library only, nothing from the ``ai`` package.
"""

import ast
import json
import re
import uuid
from dataclasses import dataclass, field

# Bigger answers are not parsed as Python literals: ast work grows with the input.
_MAX_SOURCE = 20_000
_FAIL = object()


@dataclass
class TextToolCalls:
    """What :func:`extract_tool_calls` found in a model's text.

    Attributes:
        calls (list): OpenAI-style tool calls, ``{"id", "type": "function", "function":
            {"name", "arguments"}}``, ``arguments`` being a JSON object as a string.
        text (str): the text with every recognised call and its markup removed.
        malformed (list): a short description of each piece that looked like a tool call
            but could not be turned into one; those pieces are removed from ``text`` too.
    """

    calls: list = field(default_factory=list)
    text: str = ""
    malformed: list = field(default_factory=list)


def extract_tool_calls(text, tools):
    """Turn tool calls written into ``text`` into real tool calls.

    Args:
        text (str): the content of a model's answer.
        tools (list or None): the OpenAI tool schemas that the request offered; a call to
            any other tool is reported as malformed.

    Returns:
        TextToolCalls: the calls in the order they were written, the remaining prose and
            the pieces that could not be used. Text without any call comes back unchanged.
    """
    if not isinstance(text, str) or not text.strip():
        return TextToolCalls(text=text if isinstance(text, str) else "")
    catalog = _Catalog(tools)
    hits = _collect(text, catalog, _FINDERS)
    if not any(items for _, _, items in hits):
        bare = _bare_call(text, catalog)
        if bare:
            return TextToolCalls(
                calls=[{"id": _new_id(set()), "type": "function", "function": bare}]
            )
        return TextToolCalls(text=text)
    calls, malformed, taken = [], [], set()
    for _, _, items in hits:
        for item in items:
            if isinstance(item, str):
                malformed.append(item)
            else:
                calls.append({"id": _new_id(taken), "type": "function", "function": item})
    return TextToolCalls(calls=calls, text=_remaining_text(text, hits), malformed=malformed)


# ---------------------------------------------------------------------------------------
# Offered tools, arguments and the call format


class _Catalog:
    """The offered tools, looked up by name regardless of case and namespace prefix."""

    _PREFIXES = ("functions.", "function.", "tools.", "default_api.")

    def __init__(self, tools):
        self._tools = {}
        for tool in tools or ():
            function = tool.get("function", tool) if isinstance(tool, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                params = function.get("parameters")
                params = params if isinstance(params, dict) else {}
                self._tools[self._key(function["name"])] = (function["name"], params)

    def lookup(self, name):
        """Return ``(name, parameters schema)`` of the offered tool ``name``, or None."""
        return self._tools.get(self._key(name)) if isinstance(name, str) else None

    def fitting(self, arguments):
        """Return ``(name, parameters schema)`` of the one offered tool that takes every key
        of ``arguments`` and has all it requires, or None (none, or more than one)."""
        keys = set(arguments)
        fits = [
            (name, params)
            for name, params in self._tools.values()
            if keys
            and keys <= set(params.get("properties") or {})
            and set(params.get("required") or ()) <= keys
        ]
        return fits[0] if len(fits) == 1 else None

    def _key(self, name):
        key = name.strip().lower()
        for prefix in self._PREFIXES:
            if key.startswith(prefix):
                return key[len(prefix) :]
        return key


# A whole answer that is one name, perhaps in backticks or with empty parentheses.
_BARE_NAME = re.compile(r"^`?([A-Za-z_]\w*)(?:\(\))?`?\.?$")


def _bare_call(text, catalog):
    """The call of an answer that is only the name of an offered tool needing no argument
    (``noop``, ``review_journal()``), or None. A name without an underscore must match in
    case: "Look." answering a player is a word, not the look tool."""
    match = _BARE_NAME.match(text.strip())
    found = catalog.lookup(match.group(1)) if match else None
    if found is None or (found[1].get("required") or ()):
        return None
    name = match.group(1)
    if "_" not in name and name != found[0]:
        return None
    return {"name": found[0], "arguments": "{}"}


def _build_call(catalog, name, arguments):
    """A ``{"name", "arguments"}`` function dict, or a string saying why there is none.

    A call under a name no tool has whose arguments fit one offered tool alone is that
    tool's (a small model wrote the speaker's name: ``{"name": "Ada", "arguments":
    {"content": ...}}``).
    """
    if isinstance(arguments, str):
        arguments = _loads_lenient(arguments) if arguments.strip() else {}
    if arguments is None:
        arguments = {}
    found = catalog.lookup(name)
    if found is None and isinstance(arguments, dict):
        found = catalog.fitting(arguments)
    if found is None:
        return f"tool {_snippet(str(name), 40)!r} was not offered"
    name, params = found
    if not isinstance(arguments, dict):
        return f"arguments for {name!r} are not a JSON object"
    if arguments.get("type") == "object" and isinstance(arguments.get("properties"), dict):
        # Small models sometimes echo the tool's definition instead of calling it.
        return f"a definition of {name!r} instead of a call"
    try:
        encoded = json.dumps(
            _coerce_arguments(arguments, params), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError, RecursionError):
        return f"arguments for {name!r} are not JSON"
    return {"name": name, "arguments": encoded}


def _coerce_arguments(arguments, params):
    properties = params.get("properties")
    if not isinstance(properties, dict):
        return arguments
    return {key: _coerce(value, properties.get(key)) for key, value in arguments.items()}


def _coerce(value, schema):
    """``value`` converted to the schema's type where the intent is obvious ("7" -> 7)."""
    if not isinstance(schema, dict):
        return value
    kinds = schema.get("type")
    kinds = {
        kind for kind in (kinds if isinstance(kinds, list) else [kinds]) if isinstance(kind, str)
    }
    if isinstance(value, (set, frozenset, tuple)):
        value = list(value)
    if isinstance(value, str) and "string" not in kinds:
        value = _coerce_string(value, kinds)
    elif isinstance(value, float) and "integer" in kinds and value.is_integer():
        value = int(value)
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and kinds == {"string"}:
        value = str(value)
    if isinstance(value, list) and "array" in kinds:
        value = [_coerce(item, schema.get("items")) for item in value]
    return value


def _coerce_string(value, kinds):
    text = value.strip()
    if "integer" in kinds and re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if "number" in kinds and re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
        return int(text) if re.fullmatch(r"[+-]?\d+", text) else float(text)
    if "boolean" in kinds and text.lower() in ("true", "false", "yes", "no"):
        return text.lower() in ("true", "yes")
    if "null" in kinds and text.lower() in ("null", "none"):
        return None
    if kinds & {"array", "object"} and text[:1] in ("[", "{"):
        parsed = _loads_lenient(text)
        return value if parsed is _FAIL else parsed
    if "array" in kinds:
        return [value]
    return value


def _new_id(taken):
    call_id = f"call_{uuid.uuid4().hex[:12]}"
    while call_id in taken:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
    taken.add(call_id)
    return call_id


def _snippet(text, limit=60):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------
# Lenient JSON

_CLOSERS = {"{": "}", "[": "]", "(": ")"}
# A quote opens a string only after one of these: an apostrophe in a word does not.
_QUOTE_AFTER = set("{[(,:=")
_TRAILING_COMMA = re.compile(r",\s*([}\]])")
_BARE_KEY = re.compile(r"([{,]\s*)([A-Za-z_]\w*)\s*:")
# A word left unquoted as a value: "cites": [journal_20261126_082827_6] (Qwen2.5-Coder-1.5B).
_BARE_VALUE = re.compile(r"([\[,:]\s*)([A-Za-z_][\w\-]*)(?=\s*[,\]}])")
# A string in double or single quotes, escapes and all.
_STRING = re.compile(r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')")
_JSON_WORDS = re.compile(rf"{_STRING.pattern}|\b(true|false|null)\b")
_PYTHON_WORDS = {"true": "True", "false": "False", "null": "None"}


def _scan(text, start):
    """Follow brackets and strings from ``text[start]`` on.

    Returns:
        tuple: ``(end, stack, quote)``: ``end`` is the index just past the bracket that
            closes the first one opened (None when it never closes or a closer does not
            match); ``stack`` and ``quote`` are what was still open where scanning stopped.
    """
    stack, quote, escaped, last = [], None, False, ""
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote, last = None, char
            continue
        if char == '"' or (char == "'" and last in _QUOTE_AFTER):
            quote = char
        elif char in _CLOSERS:
            stack.append(char)
        elif char in ")]}":
            if not stack or _CLOSERS[stack.pop()] != char:
                return None, stack, None
            if not stack:
                return index + 1, stack, None
        if not char.isspace():
            last = char
    return None, stack, quote


def _close_brackets(text):
    """``text`` with its open string and brackets closed, for an answer cut off early."""
    _, stack, quote = _scan(text, 0)
    closers = "".join(_CLOSERS[opener] for opener in reversed(stack))
    if quote:
        return text + quote + closers
    return text.rstrip().rstrip(",:") + closers


def _repairs(text):
    """``text`` and lightly repaired versions of it, mildest first."""
    bases = [text]
    if "{{" in text:
        # Qwen2.5 copies its chat template's escaping: {{"name": ..., "arguments": {{...}}}}.
        if text.startswith("{{") and text.endswith("}}"):
            bases.append(text[1:-1])
        bases.append(text.replace("{{", "{").replace("}}", "}"))
    for base in bases:
        yield base
        fixed = _TRAILING_COMMA.sub(r"\1", base)
        yield fixed
        yield _close_brackets(fixed)
        keyed = _BARE_KEY.sub(r'\1"\2":', _close_brackets(fixed))
        yield keyed
        yield _BARE_VALUE.sub(_quoted_word, keyed)


def _quoted_word(match):
    """Quote a bare word value, unless it is one of JSON's or Python's constants."""
    word = match.group(2)
    if word.lower() in ("true", "false", "null", "none"):
        return match.group(0)
    return f'{match.group(1)}"{word}"'


def _loads_lenient(raw):
    """Parse JSON as a small model writes it; ``_FAIL`` when no light repair helps."""
    for candidate in _repairs(raw.strip()):
        try:
            return json.loads(candidate, strict=False)
        except (ValueError, RecursionError):
            pass
        value = _python_literal(candidate)
        if value is not _FAIL:
            return value
    return _FAIL


def _python_literal(text):
    """A dict or list written as a Python literal (single quotes), never evaluated code."""
    if len(text) > _MAX_SOURCE or text[:1] not in ("{", "["):
        return _FAIL
    source = _JSON_WORDS.sub(lambda match: match.group(1) or _PYTHON_WORDS[match.group(2)], text)
    try:
        value = ast.literal_eval(source)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _FAIL
    return value if isinstance(value, (dict, list)) else _FAIL


# ---------------------------------------------------------------------------------------
# Call-shaped values

_NAME_KEYS = ("name", "tool", "tool_name", "function", "function_name")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input", "params", "kwargs")
_ENVELOPE_KEYS = {"type", "id", "index", "call_id"}


def _interpret(value, catalog):
    """Items (call dicts or malformed strings) for a value shaped like calls, else None."""
    if isinstance(value, list):
        groups = [_interpret(element, catalog) for element in value]
        return [item for group in groups for item in group] if value and all(groups) else None
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("tool_calls"), list):
        return _interpret(value["tool_calls"], catalog)
    inner = value.get("function")
    if isinstance(inner, dict) and isinstance(inner.get("name"), str):
        return [_call_from_object(inner, "name", catalog)]
    for key in _NAME_KEYS:
        if isinstance(value.get(key), str):
            return [_call_from_object(value, key, catalog)]
    if len(value) == 1:
        # {"say": {"message": "hi"}}: only trusted for an offered tool's name.
        name, arguments = next(iter(value.items()))
        if isinstance(arguments, dict) and catalog.lookup(name):
            return [_build_call(catalog, name, arguments)]
    return None


def _call_from_object(obj, name_key, catalog):
    for key in _ARGUMENT_KEYS:
        if key in obj:
            return _build_call(catalog, obj[name_key], obj[key])
    # No arguments key: the other keys are the arguments, {"name": "say", "message": "hi"}.
    rest = {key: val for key, val in obj.items() if key != name_key and key not in _ENVELOPE_KEYS}
    return _build_call(catalog, obj[name_key], rest)


# ---------------------------------------------------------------------------------------
# Finders: each returns hits ``(start, end, items)`` for one form of written call

_CALL_FENCE_LANGS = {"tool_call", "tool_calls", "tool_code", "tool", "function_call", "functions"}
_FENCE = re.compile(r"```[ \t]*([A-Za-z_][\w.+-]*(?=\s))?[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_WRAPPER_NAMES = r"tool_calls?|function_calls?|tools|toolcall"
_WRAPPER_OPEN = re.compile(rf"<\|?\s*({_WRAPPER_NAMES})(?:_start|_begin)?\s*\|?>", re.I)
_WRAPPER_CLOSE = re.compile(
    rf"<\|?\s*/\s*(?:{_WRAPPER_NAMES})\s*\|?>|<\|(?:{_WRAPPER_NAMES})_end\|>", re.I
)
_NAMED_OPEN = re.compile(
    r"<(function|invoke|tool)(?:\s*=\s*[\"']?([\w.-]+)[\"']?|\s+name\s*=\s*[\"']([^\"'>]+)[\"'])"
    r"\s*>",
    re.I,
)
_PARAMETER = re.compile(
    r"<(?:parameter\s*=\s*[\"']?(?P<eq>[\w.-]+)[\"']?|parameter\s+name\s*=\s*[\"']"
    r"(?P<attr>[^\"'>]+)[\"']|(?P<tag>[A-Za-z_][\w-]*))\s*>"
    r"(?P<value>.*?)(?:</\s*(?:parameter|(?P=tag))\s*>|(?=<parameter[\s=])|\Z)",
    re.S | re.I,
)
_CALLISH = re.compile(
    r"(?:[\"']|[{,]\s*)(?:name|function|tool|tool_name|arguments|parameters)[\"']?\s*:"
)
_JSON_OPEN = re.compile(r"[{\[]")
_JSON_LIKE_START = re.compile(r"[{\[]\s*(?:[\"'{\[]|[A-Za-z_]\w*\s*:)")
_CALL_LIST_START = re.compile(r"\[\s*(?:[A-Za-z_]\w*\.)?[A-Za-z_]\w*\(")
_CALL_START = re.compile(r"(?<![\w.])((?:[A-Za-z_]\w*\.)?[A-Za-z_]\w*)\(")
_STRAY_MARKUP = re.compile(rf"\[TOOL_CALLS\]|<\|python_tag\|>|(?:{_WRAPPER_CLOSE.pattern})", re.I)


def _find_fences(text, catalog):
    hits = []
    for match in _FENCE.finditer(text):
        language, body = (match.group(1) or "").lower(), match.group(2)
        items = _body_items(body, catalog)
        if not items and language in _CALL_FENCE_LANGS:
            items = [f"unreadable {language} block: {_snippet(body)}"]
        if items:
            hits.append((match.start(), match.end(), items))
    return hits


def _find_wrapper_tags(text, catalog):
    """``<tool_call>...</tool_call>`` and kin; a missing closing tag ends at the next one."""
    hits, position = [], 0
    while opening := _WRAPPER_OPEN.search(text, position):
        closing = _WRAPPER_CLOSE.search(text, opening.end())
        following = _WRAPPER_OPEN.search(text, opening.end())
        if closing and (not following or closing.start() < following.start()):
            body_end, end = closing.start(), closing.end()
        else:
            body_end = end = following.start() if following else len(text)
        body = text[opening.end() : body_end]
        tag = opening.group(1).lower()
        items = _body_items(body, catalog) or [f"unreadable <{tag}> block: {_snippet(body)}"]
        hits.append((opening.start(), end, items))
        position = end
    return hits


def _find_named_tags(text, catalog):
    """``<function=say>``, ``<function name="say">``, ``<invoke name="say">`` blocks."""
    hits, position = [], 0
    while opening := _NAMED_OPEN.search(text, position):
        kind, name = opening.group(1), opening.group(2) or opening.group(3)
        stops = (
            re.compile(rf"</\s*{kind}\s*>", re.I).search(text, opening.end()),
            _NAMED_OPEN.search(text, opening.end()),
            _WRAPPER_CLOSE.search(text, opening.end()),
        )
        body_end = min((stop.start() for stop in stops if stop), default=len(text))
        end = stops[0].end() if stops[0] and stops[0].start() == body_end else body_end
        hits.append(
            (opening.start(), end, [_tag_call(name, text[opening.end() : body_end], catalog)])
        )
        position = end
    return hits


# ``<add_journal_entry content="..."/>``: a tag named after a tool, its arguments as
# attributes (Qwen2.5-Coder-1.5B wrote extraction's calls so; read as prose, the whole tag
# was journaled as a fact).
_TOOL_TAG = re.compile(
    r"<([A-Za-z_][\w.-]*)((?:\s+[A-Za-z_][\w-]*\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*(/?)>"
)
_TAG_ATTRIBUTE = re.compile(r"([A-Za-z_][\w-]*)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")


def _find_tool_tags(text, catalog):
    """Tags named after an offered tool, arguments as attributes, with an optional body
    that is one more argument's value when the tool takes one other (``<say>hi</say>``)."""
    hits = []
    for opening in _TOOL_TAG.finditer(text):
        found = catalog.lookup(opening.group(1))
        if found is None:
            continue
        name, params = found
        arguments = {
            match.group(1): match.group(2) if match.group(2) is not None else match.group(3)
            for match in _TAG_ATTRIBUTE.finditer(opening.group(2))
        }
        end = opening.end()
        closing = (
            None if opening.group(3) else re.compile(rf"</\s*{re.escape(opening.group(1))}\s*>")
        )
        closed = closing.search(text, end) if closing else None
        if closed:
            missing = [key for key in params.get("required", ()) if key not in arguments]
            body = text[end : closed.start()].strip()
            if body and len(missing) == 1:
                arguments[missing[0]] = body
            end = closed.end()
        elif not arguments and not opening.group(3):
            continue  # ``<say>`` alone, in prose: not a call
        hits.append((opening.start(), end, [_build_call(catalog, name, arguments)]))
    return hits


def _tag_call(name, body, catalog):
    body = body.strip()
    if not body:
        return _build_call(catalog, name, {})
    if body[0] in ("{", "["):
        return _build_call(catalog, name, _loads_lenient(body))
    arguments = {
        match.group("eq") or match.group("attr") or match.group("tag"): match.group("value").strip()
        for match in _PARAMETER.finditer(body)
    }
    if not arguments:
        return f"unreadable arguments for {name!r}: {_snippet(body)}"
    return _build_call(catalog, name, arguments)


def _find_json(text, catalog):
    """Bare JSON objects and arrays shaped like calls, repaired when lightly broken."""
    hits, position = [], 0
    while match := _JSON_OPEN.search(text, position):
        start = match.start()
        end, _, _ = _scan(text, start)
        hit = _json_hit(text, start, end, catalog)
        hits += [hit] if hit else []
        if hit:
            position = hit[1]
        elif end and not _CALLISH.search(text, start, end):
            # Nothing call-shaped can hide in brackets without a call's keys: skip them whole,
            # which keeps deeply nested brackets from costing quadratic time.
            position = end
        else:
            position = start + 1
    return hits


def _json_hit(text, start, end, catalog):
    if end is None:
        return _unclosed_json_hit(text, start, catalog)
    raw = text[start:end]
    value = _loads_lenient(raw)
    if value is _FAIL:
        return (start, end, [_unreadable_json(raw)]) if _CALLISH.search(raw) else None
    items = _interpret_safely(value, catalog)
    return (start, end, items) if items else None


def _unclosed_json_hit(text, start, catalog):
    """A call whose final brace is missing: cut off at the end, or followed by prose."""
    if not _JSON_LIKE_START.match(text, start) or not _CALLISH.search(text, start):
        return None
    # The object ends at the end of the text or at one of its last closing brackets.
    closers = [index + 1 for index in range(len(text) - 1, start, -1) if text[index] in "}]"]
    for end in [len(text)] + closers[:8]:
        value = _loads_lenient(text[start:end])
        items = None if value is _FAIL else _interpret_safely(value, catalog)
        if items:
            return (start, end, items)
    return (start, len(text), [_unreadable_json(text[start:])])


def _interpret_safely(value, catalog):
    try:
        return _interpret(value, catalog)
    except RecursionError:  # absurdly deep nesting is no call
        return None


def _unreadable_json(raw):
    return f"unreadable tool call JSON: {_snippet(raw)}"


def _find_call_lists(text, catalog):
    """Pythonic lists of calls, ``[say(message="hi"), noop()]`` (Llama 3.2 style)."""
    hits = []
    for match in _CALL_LIST_START.finditer(text):
        end, _, _ = _scan(text, match.start())
        node = _parse_python(text[match.start() : end]) if end else None
        if isinstance(node, ast.List) and all(isinstance(elt, ast.Call) for elt in node.elts):
            hits.append((match.start(), end, [_call_item(elt, catalog) for elt in node.elts]))
    return hits


def _find_python_calls(text, catalog):
    """``say(message="hi")``: offered tools anywhere, unknown ones only alone on a line."""
    hits = []
    for match in _CALL_START.finditer(text):
        start, offered = match.start(), catalog.lookup(match.group(1))
        end, _, _ = _scan(text, match.end() - 1)
        if end is None and not offered:
            continue
        source = text[start:end] if end else _close_brackets(text[start:])
        end = end or len(text)
        alone = _alone_on_line(text, start, end)
        node = _parse_python(source)
        node = node if isinstance(node, ast.Call) else None
        if not offered and (node is None or not node.keywords or not alone):
            continue
        item = _call_item(node, catalog) if node else f"unreadable call: {_snippet(source)}"
        # A broken call inside a sentence is more likely prose: "I'd say(roughly) five".
        if isinstance(item, dict) or alone:
            hits.append((start, end, [item]))
    return hits


def _find_stray_markup(text, catalog):
    """Closing tags and call markers left over once the calls around them are found."""
    return [(match.start(), match.end(), []) for match in _STRAY_MARKUP.finditer(text)]


# Outside strings, in a call written as Python: a keyword without its "=" (``importance 2``),
# as Qwen2.5-Coder-1.5B wrote it (with a word left unquoted in a list, which
# ``_BARE_VALUE`` finds: ``cites=[journal_20261127_003102]``).
_SPACED_KEYWORD = re.compile(r"([(,]\s*)([A-Za-z_]\w*)\s+(?=[-\d\"'\[{])")


def _parse_python(source):
    """Parse ``source`` as one Python expression, else as lightly repaired; None if neither."""
    if not source or len(source) > _MAX_SOURCE:
        return None
    for candidate in (source.strip(), _repaired_python(source.strip())):
        try:
            return ast.parse(candidate, mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            pass
    return None


def _repaired_python(source):
    """``source`` with the slips of ``_SPACED_KEYWORD`` and ``_BARE_VALUE`` mended outside
    its strings."""
    parts = _STRING.split(source)
    for index in range(0, len(parts), 2):  # the even parts lie outside strings
        code = _SPACED_KEYWORD.sub(r"\1\2=", parts[index])
        parts[index] = _BARE_VALUE.sub(_quoted_word, code)
    return "".join(parts)


def _call_item(node, catalog):
    """A call dict (or malformed string) for a parsed ``name(...)``; values are literals only."""
    name = ast.unparse(node.func)
    found = catalog.lookup(name)
    if found is None:
        return f"tool {_snippet(name, 40)!r} was not offered"
    try:
        arguments = _call_arguments(node, found[1])
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return f"unreadable arguments in call to {found[0]!r}"
    return _build_call(catalog, name, arguments)


def _call_arguments(node, params):
    if any(keyword.arg is None for keyword in node.keywords):
        raise ValueError("**kwargs")
    arguments = {keyword.arg: _literal(keyword.value) for keyword in node.keywords}
    if node.args:
        # Positional values go to the required parameters first, then to the others.
        required = [name for name in params.get("required") or () if isinstance(name, str)]
        names = required + [name for name in params.get("properties") or {} if name not in required]
        names = [name for name in names if name not in arguments]
        if len(node.args) > len(names):
            raise ValueError("too many positional arguments")
        arguments.update({name: _literal(arg) for name, arg in zip(names, node.args)})
    return arguments


def _literal(node):
    if isinstance(node, ast.Name) and node.id.lower() in ("true", "false", "null", "none"):
        return {"true": True, "false": False}.get(node.id.lower())
    return ast.literal_eval(node)


def _alone_on_line(text, start, end):
    """True when only list marks, quotes of code and punctuation share the line with it."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    return not text[line_start:start].strip(" \t`>*-") and not text[end:line_end].strip(" \t`;.")


# Earlier finders win where hits overlap: a fence or a tag claims the JSON inside it.
_INNER_FINDERS = (
    _find_wrapper_tags,
    _find_named_tags,
    _find_tool_tags,
    _find_call_lists,
    _find_json,
    _find_python_calls,
)
_FINDERS = (_find_fences,) + _INNER_FINDERS + (_find_stray_markup,)


def _collect(text, catalog, finders):
    """Non-overlapping hits of ``finders`` in ``text``, in the order they were written."""
    hits = []
    for finder in finders:
        for start, end, items in finder(text, catalog):
            if all(end <= taken[0] or start >= taken[1] for taken in hits):
                hits.append((start, end, items))
    return sorted(hits, key=lambda hit: hit[0])


def _body_items(body, catalog):
    """Items of every call found inside a fence or a wrapper tag."""
    return [item for _, _, items in _collect(body, catalog, _INNER_FINDERS) for item in items]


# ---------------------------------------------------------------------------------------
# What remains to be said


def _remaining_text(text, hits):
    pieces, position = [], 0
    for start, end, _ in hits:
        # `say("hi")` written as inline code leaves no empty backticks behind.
        if start > position and end < len(text) and text[start - 1] == text[end] == "`":
            start, end = start - 1, end + 1
        pieces.append(text[position : max(start, position)])
        position = max(end, position)
    pieces.append(text[position:])
    result = ""
    for piece in pieces:
        result = _join(result, piece)
    result = re.sub(r"[ \t]+\n", "\n", result)
    return re.sub(r"\n{3,}", "\n\n", result).strip()


def _join(left, right):
    left, right = left.rstrip(" \t"), right.lstrip(" \t")
    if not left or not right or left.endswith("\n") or right[0] in "\n.,;:!?)":
        return left + right
    return left + " " + right


# ---------------------------------------------------------------------------------------
# Markup that must never be spoken

_MARKUP = re.compile(
    r"```"
    r"|<\|[\w/]+\|>|\[TOOL_CALLS\]"
    r"|</?(?:tool_calls?|function_calls?|tools|toolcall|tool|function|invoke|parameter)\b"
    r"|</[A-Za-z_][\w-]*\s*>"
    r"|<[A-Za-z_][\w.-]*(?:\s+[A-Za-z_][\w-]*\s*=\s*[\"'][^>]*)?\s*/>"
    r"|<[A-Za-z_][\w.-]*\s+[A-Za-z_][\w-]*\s*=\s*[\"']"
    r"|[\"'](?:name|arguments|parameters|function|tool|tool_calls)[\"']\s*:"
    r"|\{\s*\"[^\"\n]{1,60}\"\s*:"
    r"|\b[A-Za-z_][\w.]*\(\s*[A-Za-z_]\w*\s*=(?!=)"
    r"|\b[A-Za-z_][\w.]*\(\s*[\"']"
    r"|\b[a-z][a-z0-9]*_[a-z0-9_]*\("
    r"|\b[A-Za-z_]\w*\(\s*\)",
    re.I,
)
_JSON_START = re.compile(r"[\[{]\s*(?:[\"'{\[]|\Z)")


def looks_like_markup(text):
    """Whether ``text`` still looks like tool-call markup, JSON or code.

    Such text must never be spoken aloud to players. Ordinary sentences, with quotes,
    colons, parentheses and numbers, are not markup.

    Args:
        text (str): text about to be said.

    Returns:
        bool: True for fences, tool-call tags, JSON, ``"name":`` keys and ``f(key=...)``.
    """
    if not isinstance(text, str) or not text.strip():
        return False
    stripped = text.strip()
    if _MARKUP.search(stripped):
        return True
    if stripped[0] in ("{", "["):
        return bool(_JSON_START.match(stripped)) or _loads_lenient(stripped) is not _FAIL
    return False
