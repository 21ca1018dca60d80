"""A room's **frame**: the compact view of the teacher's current step state that every
follower draws (built by the teacher's session, ``ui/live/frames``), stored beside the
room under the :func:`state_digest` of the state it shows. A room keeps its
:data:`KEPT_FRAMES` newest frames (a paused class serves an older state than the teacher's
newest), and they go with the room (closed, expired).

:class:`FrameStore` is the part of the store interface that keeps it
(:class:`~specdec_core.server.rooms.RoomStore` inherits it): public methods validate, the
backends (``_put_frame``, ``_frame``) only store. Only the teacher key writes a frame; any
reader of a live room's code may read it (it shows what the room's screens show).
"""

from __future__ import annotations

import hashlib
import json
import re
from abc import abstractmethod
from collections.abc import Mapping

from specdec_core.server.room_types import RoomError, hash_key, normalize_code

MAX_FRAME_BYTES = 262_144  # one frame as UTF-8 JSON: a long history's strip and KV table fit
KEPT_FRAMES = 4  # frames a room keeps, newest first
_DIGEST = re.compile(r"[0-9a-f]{32}")


def state_digest(page: str, state: Mapping[str, str]) -> str:
    """32 hex digits naming a published ``(page, state)`` (the store's page name, the
    state's query parameters): the teacher stores a frame under it, a follower asks for
    the frame of the state it read."""
    text = json.dumps([page, dict(state)], separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class FrameStore:
    """The frame half of the room store (mixed into ``RoomStore``, which supplies
    ``_do`` and ``clock``)."""

    def put_frame(self, code: str, key: str, digest: str, frame: str) -> None:
        """Store ``frame`` (JSON text, ≤ :data:`MAX_FRAME_BYTES`) as the room's frame of
        the state whose :func:`state_digest` is ``digest``. Raises ``room_unknown``,
        ``room_key``, ``room_state`` (a malformed digest or frame)."""
        code = normalize_code(code)
        key_hash = hash_key(key)
        if not isinstance(digest, str) or _DIGEST.fullmatch(digest) is None:
            raise RoomError("room_state", limit=MAX_FRAME_BYTES)
        if not isinstance(frame, str) or len(frame.encode("utf-8")) > MAX_FRAME_BYTES:
            raise RoomError("room_state", limit=MAX_FRAME_BYTES)
        self._do(self._put_frame, code, key_hash, digest, frame, self.clock())  # type: ignore[attr-defined]

    def frame(self, code: str, digest: str) -> str | None:
        """The room's frame of the state ``digest`` names, or ``None`` (none stored for it,
        or no longer among the newest). Raises ``room_unknown``, ``room_state``."""
        code = normalize_code(code)
        if not isinstance(digest, str) or _DIGEST.fullmatch(digest) is None:
            raise RoomError("room_state", limit=MAX_FRAME_BYTES)
        return self._do(self._frame, code, digest, self.clock(), retry=False)  # type: ignore[attr-defined]

    @abstractmethod
    def _put_frame(self, code: str, key_hash: str, digest: str, frame: str, now: float) -> None: ...

    @abstractmethod
    def _frame(self, code: str, digest: str, now: float) -> str | None: ...
