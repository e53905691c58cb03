"""Token counts kept honest for models that no offline tokenizer knows.

For such a model the counter only estimates (toksum, or four characters a token), and a
local model's chat template adds tokens nobody sees: thresholds would be crossed late. Each
answered call compares the prompt tokens the provider reports with our count of what was
sent; the model's factor is the largest recent ratio, rounded up, within bounds, so counts
never fall below what was reported. Factors are stored, and loaded at server start.
"""

import math

from evennia.utils import logger

from .models import TokenCalibration
from .utils.token_counter import calibration, set_calibration, tokenizer_tier

SAMPLES_KEPT = 20
FACTOR_STEP = 0.05
MIN_FACTOR = 0.5
MAX_FACTOR = 3.0


def needs_calibration(model):
    """Tell whether ``model``'s counts are estimates (no offline tokenizer of its own)."""
    return tokenizer_tier(model) != "tiktoken"


def factor_for(samples):
    """Return the factor of a list of ratios: the largest, rounded up to a step, bounded."""
    steps = math.ceil(round(max(samples) / FACTOR_STEP, 6))
    return min(MAX_FACTOR, max(MIN_FACTOR, steps * FACTOR_STEP))


def observe(model, counted, reported):
    """Learn from one call: we counted ``counted`` prompt tokens, the provider ``reported``.

    Runs in the reactor thread (it writes the database).

    Returns:
        float or None: The model's new factor, or None when nothing was learned.
    """
    if not needs_calibration(model) or not counted or not reported:
        return None
    # ``counted`` was made with the current factor: the raw estimate's ratio undoes it.
    ratio = round(reported / counted * calibration(model), 4)
    row, _ = TokenCalibration.objects.get_or_create(model=model)
    row.samples = (list(row.samples or []) + [ratio])[-SAMPLES_KEPT:]
    factor = factor_for(row.samples)
    if factor != row.factor:
        logger.log_info(
            f"AI: token counts of {model} now x{factor:.2f} (provider reported {reported}, "
            f"counted {counted})"
        )
    row.factor = factor
    row.save()
    set_calibration(model, factor)
    return factor


def load_calibrations():
    """Apply every stored factor (at server start)."""
    for model, factor in TokenCalibration.objects.values_list("model", "factor"):
        set_calibration(model, factor)
