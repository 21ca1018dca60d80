"""One way for every page to report an error: :func:`error_message` / :func:`show_error`.

A :class:`~specdec_core.core.errors.SpecDecError` becomes the translated string ``err_<code>``
(``rl_err_<code>`` for the rule lab's weights) formatted with its ``params``; a code with no
string of its own falls back to the translated ``err_<class default code>`` and then to a
generic message. Anything else (a bug) is logged on the server and shown as a generic
translated message: never a traceback, never a server path.

Every parameter is text a student may have typed (an edit, a prompt piece), so each is
escaped for Streamlit markdown before it is put in a message: no formatting, no LaTeX, no
link or image ever comes from student text. A parameter ``why`` is a reason code: it
becomes the translated string ``err_why_<why>`` (formatted with the other parameters), so
a message's detail is in the page's language, never a Python exception's text.
"""

from __future__ import annotations

import logging
import re

import streamlit as st

from specdec_core.core.errors import RuleInputError, SpecDecError
from specdec_core.ui.i18n import strings, t

log = logging.getLogger("specdec.ui")
# CommonMark lets a backslash escape any ASCII punctuation; Streamlit adds $ (LaTeX) and :
# (emoji / icon shortcodes such as :material/x: and :red[...]).
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:=\"'&^%@])")


def plain(text: object) -> str:
    """``text`` escaped so Streamlit's markdown shows it literally (one line)."""
    flat = str(text).replace("\r", " ").replace("\n", "↵")
    return _MARKDOWN.sub(r"\\\1", flat)


def code_span(text: object) -> str:
    """``text`` as one inline code span that Streamlit's markdown shows literally (one line).

    Inside a code span a backslash is literal, so nothing is escaped (:func:`plain` there
    would show its backslashes); a backtick in ``text`` gets a longer fence, and a leading or
    trailing backtick or space a padding space (CommonMark strips one on each side)."""
    flat = str(text).replace("\r", " ").replace("\n", "↵")
    fence = "`" * (max((len(r) for r in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat[:1] in ("`", " ") or flat[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _keys(exc: SpecDecError) -> list[str]:
    keys = [f"rl_err_{exc.code}"] if isinstance(exc, RuleInputError) else []
    reason = exc.params.get("reason")
    if isinstance(reason, str) and reason.isidentifier():  # a reason code with its own string
        keys.append(f"err_{exc.code}_{reason}")
    keys.append(f"err_{exc.code}")
    for cls in type(exc).__mro__:  # a class's default code names its generic message
        code = getattr(cls, "default_code", None)
        if code:
            keys.append(f"err_{code}")
    return keys


def _prefix(exc: BaseException) -> str:
    """The message's lead and its space: "Nothing was changed: " (``error_prefix``), or the
    string an error class names in ``prefix_key`` (a live class's errors: "Live class: ",
    a join or an answer changes no lesson), with no space after a full-width colon."""
    key = getattr(exc, "prefix_key", "error_prefix")
    text = t(key) if key in strings() else t("error_prefix")
    return text if key != "error_prefix" and text.endswith("：") else f"{text} "


def error_message(exc: BaseException) -> str:
    """The translated, markdown-safe message for ``exc`` (with the "Nothing was changed:"
    prefix, or its class's own ``prefix_key``)."""
    if isinstance(exc, SpecDecError):
        params = {k: plain(v) for k, v in exc.params.items() if k != "why"}
        why = exc.params.get("why")
        if isinstance(why, str) and f"err_why_{why}" in strings():  # a reason code: translated
            params["why"] = t(f"err_why_{why}", **params)
        for key in _keys(exc):
            if key in strings():
                try:
                    return f"{_prefix(exc)}{t(key, **params, detail=plain(exc))}"
                except (KeyError, IndexError, ValueError):  # a string quoting a missing param
                    continue
        return f"{_prefix(exc)}{t('err_invalid', detail=plain(exc))}"
    log.error("unexpected error in a page", exc_info=exc)
    return f"{t('error_prefix')} {t('err_unexpected')}"


def show_error(exc: BaseException, where=None) -> None:
    """Show :func:`error_message` as one ``st.error`` box (in ``where`` if given)."""
    (where or st).error(error_message(exc))
