"""Figure builders: trace in, ``go.Figure`` out (pure; the only package that imports
plotly), or an ECharts option ``dict`` for ``st.echarts_chart`` (``step``'s
``distribution_option``). Every visible word comes in through ``labels`` so pages can pass
zh or en.

One module per lesson: ``step`` (step-through distributions; ``step_slices``: the tokens
and slices it draws), ``lab`` (acceptance-rule
lab), ``drafters`` (where drafts come from), ``speed`` (speed page); ``common`` holds the
colours and token labels they share. Each module's ``__all__`` is re-exported here, so
``from specdec_core.ui.figures import distribution_option`` works."""

from specdec_core.ui.figures import common, drafters, lab, speed, step, step_slices
from specdec_core.ui.figures.common import *  # noqa: F403
from specdec_core.ui.figures.drafters import *  # noqa: F403
from specdec_core.ui.figures.lab import *  # noqa: F403
from specdec_core.ui.figures.speed import *  # noqa: F403
from specdec_core.ui.figures.step import *  # noqa: F403
from specdec_core.ui.figures.step_slices import *  # noqa: F403

__all__ = (
    common.__all__
    + step.__all__
    + step_slices.__all__
    + lab.__all__
    + drafters.__all__
    + speed.__all__
)
