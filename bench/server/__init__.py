"""Launching an SGLang server (or the stand-in) and reading back what it resolved."""
