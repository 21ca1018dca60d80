"""The drafters page ("Where drafts come from"): :mod:`~specdec_core.ui.drafters.cards`
(the prompt, one card per draft source, the run) and
:mod:`~specdec_core.ui.drafters.results` (the measured results, the strips, the drafters
this app does not run)."""
