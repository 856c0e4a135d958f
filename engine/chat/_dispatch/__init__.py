"""The engine as the adapters call it: the dispatcher that wires a chat's parts and orders its work,
what a crash or restart left in a chat (recovery), and chats whose work the store refused (stalled).
"""
