"""The ``agents`` layer: LLM providers, the five roles, prompts, transcripts and cost.

Optional: it needs the ``llm`` extra (``pip install kernelopt[llm]``). Without it the
LLM-free operators still work.
"""
