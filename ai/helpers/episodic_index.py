def prune_low_importance_entries(script, character):
    return {}
