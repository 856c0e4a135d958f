"""The per-chat work: one queue per chat so everything touching a conversation runs in order
(``_queue``), and, with several instances on one store, which instance works on which chat
(``_cluster``) and receives for which part of a channel (``_receivers``).
"""
