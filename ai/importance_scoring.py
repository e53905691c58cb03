def score_entries_with_model(script, character, limit):
    return {}
