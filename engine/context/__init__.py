"""What a request holds: the system prompt and history as the model should see them, fitted to
the model's window (``_budget``, its sizes in ``_sizes``), old turns folded into a summary
(``_folding``, in the words of ``_compaction``), token counts estimated and calibrated
(``_tokens``), the window learned (``_window``), and which pictures of the history are sent
again (``_media_history``).
"""

from __future__ import annotations

from engine.context._budget import ContextBudget
from engine.context._folding import Window
from engine.context._media_history import (
    DOWNLOAD_TIMEOUT_S,
    ImageCache,
    RecentImages,
    human_size,
)
from engine.context._prompt import (
    CUT_NOTE,
    ensure_pairing,
    for_model,
)
from engine.context._sizes import Compacted, ContextSettings, Fitted, budget_for
from engine.context._tokens import text_tokens
from engine.context._window import WindowInfo, WindowSource, discover_window

__all__ = [
    "CUT_NOTE",
    "DOWNLOAD_TIMEOUT_S",
    "Compacted",
    "ContextBudget",
    "ContextSettings",
    "Fitted",
    "ImageCache",
    "RecentImages",
    "Window",
    "WindowInfo",
    "WindowSource",
    "budget_for",
    "discover_window",
    "ensure_pairing",
    "for_model",
    "human_size",
    "text_tokens",
]
