"""The chat commands: /help, /stop, /reset, /settings and the rest, /console and /forget_me."""
