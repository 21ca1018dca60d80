"""The speed page's parts."""
