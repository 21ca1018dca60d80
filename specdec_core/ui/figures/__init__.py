"""Figure builders: trace in, ``go.Figure`` out (pure; the only package that imports
plotly), or an ECharts option ``dict`` for ``st.echarts_chart`` (``step``'s
``distribution_option``). Every visible word comes in through ``labels`` so pages can pass
zh or en.

One module per lesson: ``step`` (step-through distributions; ``step_slices``: the tokens
and slices it draws), ``lab`` (acceptance-rule
lab), ``drafters`` (where drafts come from), ``speed`` (speed page); ``common`` holds the
colours and token labels they share. Import a builder from the module that defines it."""
