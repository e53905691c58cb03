"""Figures in what builders and players read: counts that agree with their noun, and
percentages that agree with the comparison they are shown in."""

# Decimals a percentage may grow to before two shares that differ are shown apart.
MAX_PERCENT_PLACES = 4


def plural(count, singular, plural_form=None):
    """Return ``count`` with its noun in agreement: ``1 message``, ``2 messages``.

    Args:
        count (int or None): How many; None when a record does not say (``? messages``).
        singular (str): The noun for one (``entry``).
        plural_form (str, optional): The noun for any other count; ``singular`` + ``s``
            by default (``entries`` must be given).
    """
    noun = singular if count == 1 else plural_form or f"{singular}s"
    return f"{'?' if count is None else f'{count:,}'} {noun}"


def percent(share):
    """Return ``share`` (0.855) as a percentage with only the decimals it has (``85.5%``),
    up to ``MAX_PERCENT_PLACES``: a threshold is shown as set, never rounded across."""
    text = f"{share * 100:.{MAX_PERCENT_PLACES}f}".rstrip("0").rstrip(".")
    return f"{text}%"


def percent_against(share, *bounds, places=1):
    """Return ``share`` as a percentage with at least ``places`` decimals, and more where
    fewer would round it onto or across one of ``bounds`` (0.0496 against 0.05 reads
    ``4.96%``, never ``5.0%``): the figure agrees with the comparison beside it.
    """
    for shown_places in range(places, MAX_PERCENT_PLACES + 1):
        shown = round(share * 100, shown_places)
        if all(_sign(shown - _hundred(bound)) == _sign(share - bound) for bound in bounds):
            break
    return f"{share:.{shown_places}%}"


def _hundred(bound):
    # 0.07 * 100 is 7.000000000000001: the bound as it would be written.
    return round(bound * 100, MAX_PERCENT_PLACES + 2)


def _sign(difference):
    return (difference > 0) - (difference < 0)
