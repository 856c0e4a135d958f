"""Running a turn and what the user sees of it: the runner, the reply as it streams, progress,
status reactions, thoughts, slash skills, spoken answers, files sent, relaybot's own notices, and
the memory a turn's prompt carries.
"""
