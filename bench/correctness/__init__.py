"""The correctness check (docs/reference/correctness-gate.md): speed counts only when the tokens are right.

One module per job, imported by name (this package imports nothing, so the stand-in can read the check's
request-id prefix without loading the rest): `prompts` (the seeded prompt set; when a launch cannot be
checked), `collect` (sending it to a server), `outputs` (what a launch answered, what the reference expects),
`verdict` (judging a launch).
"""
