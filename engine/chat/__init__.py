"""What a chat sees of the engine: the dispatcher (the engine as adapters call it), a message's
way in (``_intake``), turns and their delivery, commands, confirmations, background jobs, each
chat's settings, schedules, media, limits and permissions, forgetting and housekeeping.
"""
