"""Replay: recorded runs fed back through a policy.

trajectories (readers for agentfsm traces and foreign recorded formats), trace (the
JSON-lines trace writer and reader), engine (`replay_run` and `compare`).
"""
