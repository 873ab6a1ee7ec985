"""The runner: the whole loop through litellm with Python tools.

loop (`run`, `arun` and the litellm adapter), session (the run's messages, trace and
result), retry (tenacity retries of transient provider failures). litellm is imported
when a run starts, never when this package is imported.
"""
