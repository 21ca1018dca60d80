"""The engine outside a page, with no Streamlit: the process-wide pair registry
(``pairs``), the speed page's measurement queue, its tasks and the worker process that runs
them (``jobs``, ``tasks``, ``worker``), and the command line's commands (``cli``; the parser
is ``specdec_core/__main__.py``).
"""
