"""The tool-call loop: ask the model, run the tools it asks for (``_calls``), feed the results
back, repeat; background tools run as jobs (``_jobs``). ``_types`` holds the values a turn is
made of.
"""
