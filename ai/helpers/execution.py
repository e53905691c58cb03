"""Token accounting of whole conversations."""

from ..utils.token_counter import REPLY_PRIMING_TOKENS, count_message_tokens


def count_conversation_tokens(history, model):
    """Count the tokens a conversation costs when sent to ``model``.

    A message read from the history store carries its ``token_count`` (counted once, when
    it was stored) and is not counted again; any other message is counted now.

    Args:
        history (list): Messages in the ``{role, content, ...}`` format.
        model (str): The litellm model string whose tokenizer counts.

    Returns:
        int: Tokens of every message, tool calls included, plus the reply priming.
    """
    if not history:
        return 0
    total = REPLY_PRIMING_TOKENS
    for message in history:
        stored = message.get("token_count")
        total += stored if stored is not None else count_message_tokens(message, model)
    return total
