"""Tree verification: a drafted token tree checked in one target forward with a tree attention mask
(pieces, round driver, step machine, records, views).
"""
