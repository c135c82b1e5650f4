"""One helper finds every secret in a database URL, and `redact` / `scrub` mask each one (issue 30 §4): the
userinfo password and libpq's secret parameters (`password`, `sslpassword`, `passfile`, `sslkey`, ...) in any
case, written once or several times, raw or percent-encoded."""

from __future__ import annotations

from urllib.parse import quote, quote_plus

import pytest

from db.engine import DatabaseURLError, redact, resolve_url, scrub, url_secrets

SECRET = "S3cr#t/pw:1"
ENC = quote(SECRET, safe="")
BASE = "postgresql://specbench@db.example:5432/specbench"

# (how the secret is written, the URL, the value a driver would quote)
FORMS = [
    ("userinfo", f"postgresql://specbench:{ENC}@db.example:5432/specbench", SECRET),
    ("password", f"{BASE}?password={ENC}", SECRET),
    ("PASSWORD", f"{BASE}?sslmode=require&PASSWORD={ENC}", SECRET),
    ("PassWord", f"{BASE}?PassWord={ENC}&application_name=x", SECRET),
    ("sslpassword", f"{BASE}?sslpassword={ENC}", SECRET),
    ("SSLPassword", f"{BASE}?SSLPassword={ENC}", SECRET),
    ("passfile", f"{BASE}?passfile=/home/{ENC}/.pgpass", f"/home/{SECRET}/.pgpass"),
    ("sslkey", f"{BASE}?sslkey=/keys/{ENC}.key", f"/keys/{SECRET}.key"),
    ("sslkeylogfile", f"{BASE}?sslkeylogfile=/tmp/{ENC}.log", f"/tmp/{SECRET}.log"),
    ("oauth_client_secret", f"{BASE}?oauth_client_secret={ENC}", SECRET),
    ("password twice", f"{BASE}?password=other&password={ENC}", SECRET),
    ("plus-encoded", f"{BASE}?password={quote_plus(SECRET)}", SECRET),
]


@pytest.mark.parametrize(("form", "url", "value"), FORMS, ids=[f for f, _, _ in FORMS])
def test_every_form_is_found_and_masked(form: str, url: str, value: str) -> None:
    assert url_secrets(url), form
    resolved = resolve_url(url)
    assert url_secrets(resolved), form  # the driver mapping keeps the secret, and the helper still sees it
    for shown in (redact(url), redact(resolved)):
        assert SECRET not in shown and ENC not in shown and quote_plus(SECRET) not in shown, shown
        assert "***" in shown and "db.example" in shown
    # A driver message that quotes the secret, raw, percent- or plus-encoded.
    forms = (value, quote(value, safe=""), quote_plus(value))
    cleaned = scrub("failed: " + " | ".join(repr(f) for f in forms), resolved)
    assert not any(f in cleaned for f in forms), cleaned


def test_a_clean_url_has_no_secrets_and_keeps_its_parameters() -> None:
    url = f"{BASE}?sslmode=require&application_name=nightly&options=-csearch_path%3Dx"
    assert url_secrets(url) == []
    shown = redact(url)
    assert "***" not in shown and "sslmode=require" in shown and "application_name=nightly" in shown
    assert scrub("nothing to hide", url) == "nothing to hide"


def test_names_of_the_secret_parts_are_reported_as_written() -> None:
    url = f"postgresql://u:{ENC}@h/db?SSLPassword=x&sslkey=/k"
    assert url_secrets(url) == ["password", "SSLPassword", "sslkey"]
    assert url_secrets("not a url") == ["an unparseable URL"]


@pytest.mark.parametrize(
    "url",
    [
        "",
        "   ",
        "sqlite:///file:x.db?mode=ro&uri=true",
        "sqlite:///file:specbench.db",
        "sqlite:///x.db?URI=true",
    ],
)
def test_an_empty_url_and_sqlite_file_uris_are_refused(url: str) -> None:
    with pytest.raises(DatabaseURLError) as e:
        resolve_url(url)
    assert "\n" not in str(e.value)
