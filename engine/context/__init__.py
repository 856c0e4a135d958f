"""What a request holds: the system prompt and history as the model should see them, fitted to
the model's window (``_budget``), old turns folded into a summary (``_compaction``), token counts
estimated and calibrated (``_tokens``), the window learned (``_window``), and which pictures of
the history are sent again (``_media_history``).
"""
