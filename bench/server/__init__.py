"""Launching an SGLang server (or the stand-in) and reading back what it resolved: argv, env, HTTP, flags, spec modes."""
