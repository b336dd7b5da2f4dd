"""Dev sets written from a user's own conversations (`evolve label`).

A model writes candidate questions (generate.py), or the offline rules do (offline.py), or a
served memory's traced queries seed them (seeds.py); every candidate passes deterministic
checks and independent answer checks before it is kept (checks.py); a labelling run journals
every model call so an interrupted run resumes without asking again (journal.py, run.py).
`kinds.py` holds the vocabulary and defaults, light enough for the CLI to import at start.
"""
