"""Lesson states you can name, share and replay: links, replay, one-click scenarios, trace files."""
