"""Operating the store, for every backend: status and pruning, forgetting a user, what the web
console reads, and its sign-in.
"""
