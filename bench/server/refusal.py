"""Whether a failed launch was refused (SGLang rejected its arguments, or no model), from its exit code and
log tail (contract §6.9): it fails alike on every try, so its job is not retried (runners/worker.py)."""

import re

# SGLang checks a launch's arguments in ServerArgs.__post_init__ and raises there (ValueError, AssertionError,
# NotImplementedError): the traceback's frame names the file. argparse exits 2 with "usage:" and "error:".
_ARGS_FRAME = re.compile(r'server_args\.py", (?:line \d+, )?in ')
_ARGPARSE = re.compile(r"^usage: .*^\S+: error: ", re.M | re.S)
# transformers / huggingface_hub when the model is neither a folder nor a model id it can fetch.
_NO_MODEL = re.compile(
    r"is not a local folder and is not a valid model identifier|RepositoryNotFoundError|"
    r"does not appear to have a file named config\.json",
)

ARGUMENTS = "SGLang refused its arguments"
MODEL = "the model is not there"


def refused(exit_code: int | None, log_tail: str | None) -> str | None:
    """Why a failed launch was refused (ARGUMENTS or MODEL), or None for a crash, timeout or signal."""
    if exit_code is None or exit_code < 0:
        return None
    tail = log_tail or ""
    if _ARGS_FRAME.search(tail) or (exit_code == 2 and _ARGPARSE.search(tail)):
        return ARGUMENTS
    if _NO_MODEL.search(tail):
        return MODEL
    return None
