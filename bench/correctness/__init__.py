"""The correctness check (docs/reference/correctness-gate.md): speed counts only when the tokens are right.
Modules by job, imported by name (this package imports nothing, for the stand-in's sake): `prompts`,
`collect`, `outputs`, `verdict`."""
