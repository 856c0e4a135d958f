"""What a chat's turns write, for every backend: the inbox, conversations and their messages (with
the history kept in memory), context summaries, confirmations and background jobs.
"""
