"""The one step machine: the round shared by both verification shapes (``rounds``, ``machine``) and
the two shapes, ``chain`` and ``tree``, which never import each other.
"""
