"""The engine names the adapters need that ``engine/__init__`` does not export yet.

This is the only module under channels/ that imports an engine private module; every other
engine name comes from ``engine``'s public surface. Once the lead exports these, the adapters
import them from ``engine`` and this module goes.
"""

# TODO(lead): export DECISION_PATTERN and ACTION_PATTERN (the custom_id / callback_data shapes of
# answer and command-reply buttons: Discord's DynamicItem templates need the patterns themselves).
from engine._channel import ACTION_PATTERN, DECISION_PATTERN

# TODO(lead): export api_error and api_retry (the hooks an adapter's HTTP layer calls on a failed
# or retried platform request), e.g. as engine.metrics or as names on engine.
from engine._metrics import api_error, api_retry

__all__ = ["ACTION_PATTERN", "DECISION_PATTERN", "api_error", "api_retry"]
