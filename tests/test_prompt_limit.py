"""Every prompt box names its character limit under it: the speed, drafters and lossless
pages say what the step page says (Streamlit drops a paste past ``max_chars`` in the
browser, so a student who pastes more sees nothing happen). AppTest, embedded pair, en
and zh."""

from __future__ import annotations

import pytest
from conftest import open_app

from specdec_core.core.inputs import MAX_PROMPT_CHARS

LIMIT = {
    "en": "At most 20,000 characters: the browser does not take a longer paste",
    "zh": "最多 20,000 个字符：浏览器不会接收更长的粘贴",
}
#: page → (the prompt box's key, its widget kind)
BOXES = {
    "pages/speed.py": ("sp_prompt", "text_area"),
    "pages/drafters.py": ("dr_prompt", "text_area"),
    "pages/lossless.py": ("ll_prompt_own", "text_input"),
}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("page", sorted(BOXES))
def test_each_prompt_box_says_its_limit(embedded_pair, page, lang):
    at = open_app(lang=lang)
    at.switch_page(page).run()
    assert not at.exception, at.exception
    key, kind = BOXES[page]
    box = getattr(at, kind)(key=key)
    assert box.proto.max_chars == MAX_PROMPT_CHARS == 20_000
    said = [c.value for c in at.caption if LIMIT[lang] in c.value]
    assert len(said) == 1, [c.value for c in at.caption]
