def clear_stale_conversations(script, character):
    return {}
