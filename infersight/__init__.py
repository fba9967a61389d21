"""infersight: SRE observability and alerting for LLM inference served by vLLM."""

__version__ = "0.1.0"
