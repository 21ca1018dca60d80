"""Every error SpecDec Lab reports on purpose, in one hierarchy.

Each carries a ``code`` (a short name the UI turns into a zh/en message, key ``err_<code>``
in ``assets/strings/*.json``) and ``params`` (the values the message quotes). The English
``str(exc)`` is for the CLI and logs. Anything that is *not* a :class:`SpecDecError` is a
bug: the CLI and the pages show a generic message for it, never a traceback.

Pure module: no torch, no Streamlit.
"""

from __future__ import annotations


class SpecDecError(Exception):
    """Base of every documented error: ``code`` (str) and ``params`` (dict) for the UI."""

    default_code = "invalid"

    def __init__(self, message: str, code: str | None = None, **params: object) -> None:
        super().__init__(message)
        self.code = code or self.default_code
        self.params = params


class InputError(SpecDecError, ValueError):
    """Bad text or a bad value from a student (prompt, edit, position, token id)."""


class PromptError(InputError):
    """The prompt is empty or longer than the context (or the character limit) allows."""

    default_code = "prompt"


class TokenTextError(InputError):
    """Edit text that is not exactly one token."""

    default_code = "not_one_token"


class ConfigError(SpecDecError, ValueError):
    """A sampling or round setting is out of range. The message says which and why."""

    default_code = "config"


class RuleInputError(SpecDecError, ValueError):
    """Bad hand-entered weights in the acceptance-rule lab."""


class PhaseError(SpecDecError, RuntimeError):
    """A step was called out of order; the session is unchanged."""

    default_code = "phase"


class ModelLoadError(SpecDecError, RuntimeError):
    """A pair could not be loaded; the message says why and what to do
    (codes ``hub_unreachable``, ``not_allowed``, ``other``)."""

    default_code = "other"


class VocabularyMismatchError(ModelLoadError):
    """Target and draft do not share a vocabulary (speculative decoding needs one)."""

    default_code = "vocab_mismatch"


class BusyError(SpecDecError, RuntimeError):
    """The server's measurement queue is full; try again later."""

    default_code = "busy"
