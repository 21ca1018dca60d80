"""SpecDec Lab engine: speculative decoding rules, caches, traces (no Streamlit)."""
