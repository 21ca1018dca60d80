"""Chain verification: a drafted sequence y_1..y_gamma checked in one target forward (step machine,
quick edits, fast path).
"""
