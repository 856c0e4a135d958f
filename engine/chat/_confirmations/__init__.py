"""Confirmations: a destructive call asked, held, answered and run once or never; how its prompt
ends; and the standing permissions an answer can grant.
"""
