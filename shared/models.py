"""What the worker must know of a model's request shape (no prices: shared.prices)."""

# Reasoning models refuse `max_tokens` and take `max_completion_tokens` (which also bounds their
# hidden reasoning tokens); older chat models take either, so only these get the newer name.
_MAX_COMPLETION_TOKENS_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def requires_max_completion_tokens(model: str) -> bool:
    """True when the model takes its output cap as `max_completion_tokens` only."""
    return model.startswith(_MAX_COMPLETION_TOKENS_PREFIXES)
