"""The one step machine: :class:`~specdec_core.engine.session.Session` (``session``: what
both verification shapes share) and the round pieces they share (``rounds``, ``schedule``),
and the two shapes, ``chain`` and ``tree``, which never import each other.
"""
