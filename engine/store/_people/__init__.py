"""What belongs to users and chats, for every backend: access and pairing, standing permissions and
usage, spend, memory, each chat's settings, schedules.
"""
