"""Settings: what the config puts in force (``Live``, swapped by a reload), the model and tools a
turn runs with (``Tooling``), each chat's own settings, and which language relaybot speaks there.
"""
