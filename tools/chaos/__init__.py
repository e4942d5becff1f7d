"""`kraft chaos`: a seeded nemesis against a real local cluster, a recorded client
history, and a checker of that history against the final state (see tools/chaos/checker.py).
"""
