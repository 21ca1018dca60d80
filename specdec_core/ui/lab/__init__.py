"""The acceptance-rule lab page's parts."""
