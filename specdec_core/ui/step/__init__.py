"""The step-through page's parts: lesson state, edits, views of a chain round and a tree round."""
