"""Cross-process caches: the installed entry points, the flag table, cached answers.

Nothing here decides a value; each cache holds an answer the kernel or a command could
compute again, keyed on everything that decides it, and is recomputed when anything does.
"""
