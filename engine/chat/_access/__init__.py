"""Who may use the bot and how much: pairing (a stranger asks, an owner answers), the limits that
protect the owner's bill, and who pays for a request.
"""
