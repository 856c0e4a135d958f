"""A message's way in: checked, committed, held by limits, albums gathered, replies quoted, and the
pictures, files and voice it carries accepted within their limits.
"""
