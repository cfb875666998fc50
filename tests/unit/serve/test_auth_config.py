"""pagefault.serve.auth's token check, unit by unit (the server-level behaviour is in test_serve_safely.py)."""

from __future__ import annotations

import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pagefault.serve.auth import AuthConfig

SECRET = "s" * 40


def _claims(**extra):
    return {"sub": "ana", "exp": int(time.time()) + 60, **extra}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("PAGEFAULT_AUTH", "PAGEFAULT_JWT_SECRET", "PAGEFAULT_JWT_PUBLIC_KEY", "PAGEFAULT_JWT_ALGORITHMS",
                 "PAGEFAULT_JWT_AUDIENCE", "PAGEFAULT_JWT_ISSUER"):
        monkeypatch.delenv(name, raising=False)


def test_no_key_means_no_auth_and_a_key_means_tokens(monkeypatch):
    assert AuthConfig.from_env().mode == "none"
    monkeypatch.setenv("PAGEFAULT_JWT_SECRET", SECRET)
    config = AuthConfig.from_env()
    assert (config.mode, config.algorithms) == ("jwt", ("HS256",))
    assert config.verify(jwt.encode(_claims(), SECRET, algorithm="HS256")) == "ana"


@pytest.mark.parametrize("env, message", [
    ({"PAGEFAULT_AUTH": "jwt"}, "needs exactly one of"),
    ({"PAGEFAULT_JWT_SECRET": SECRET, "PAGEFAULT_JWT_PUBLIC_KEY": "x"}, "needs exactly one of"),
    ({"PAGEFAULT_AUTH": "basic"}, "use jwt"),
    ({"PAGEFAULT_JWT_SECRET": SECRET, "PAGEFAULT_JWT_ALGORITHMS": "RS256"}, "does not fit the key"),
])
def test_a_misconfigured_server_does_not_start(monkeypatch, env, message):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ValueError, match=message):
        AuthConfig.from_env()


def test_tokens_that_must_not_pass(monkeypatch):
    monkeypatch.setenv("PAGEFAULT_JWT_SECRET", SECRET)
    monkeypatch.setenv("PAGEFAULT_JWT_AUDIENCE", "pagefault")
    config = AuthConfig.from_env()
    good = jwt.encode(_claims(aud="pagefault"), SECRET, algorithm="HS256")
    assert config.verify(good) == "ana"
    unsigned = jwt.encode(_claims(aud="pagefault"), None, algorithm="none")
    bad = {
        "unsigned (alg none)": unsigned,
        "another secret": jwt.encode(_claims(aud="pagefault"), "t" * 40, algorithm="HS256"),
        "expired": jwt.encode(_claims(aud="pagefault", exp=int(time.time()) - 5), SECRET, algorithm="HS256"),
        "no exp": jwt.encode({"sub": "ana", "aud": "pagefault"}, SECRET, algorithm="HS256"),
        "no sub": jwt.encode({"exp": int(time.time()) + 60, "aud": "pagefault"}, SECRET, algorithm="HS256"),
        "another audience": jwt.encode(_claims(aud="other"), SECRET, algorithm="HS256"),
    }
    for what, token in bad.items():
        with pytest.raises(jwt.PyJWTError):
            config.verify(token)
            pytest.fail(what)


def test_an_identity_providers_public_key(monkeypatch):
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = private.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    monkeypatch.setenv("PAGEFAULT_JWT_PUBLIC_KEY", public)
    monkeypatch.setenv("PAGEFAULT_JWT_ISSUER", "https://idp.example")
    config = AuthConfig.from_env()
    assert config.algorithms == ("RS256",)
    assert config.verify(jwt.encode(_claims(iss="https://idp.example"), private, algorithm="RS256")) == "ana"
    with pytest.raises(jwt.PyJWTError):  # the HMAC-with-the-public-key confusion
        config.verify(jwt.encode(_claims(iss="https://idp.example"), public.encode()[:40], algorithm="HS256"))
    with pytest.raises(jwt.PyJWTError):
        config.verify(jwt.encode(_claims(iss="https://other"), private, algorithm="RS256"))


@pytest.mark.parametrize("key, algorithms, message", [
    ("PAGEFAULT_JWT_SECRET", "none", "PAGEFAULT_JWT_ALGORITHMS names none, not a signing algorithm: with "
                                     "PAGEFAULT_JWT_SECRET use one or more of HS256, HS384, HS512"),
    ("PAGEFAULT_JWT_SECRET", "", "PAGEFAULT_JWT_ALGORITHMS is empty: with PAGEFAULT_JWT_SECRET use one or more of HS256"),
    ("PAGEFAULT_JWT_SECRET", " , ", "PAGEFAULT_JWT_ALGORITHMS is empty"),
    ("PAGEFAULT_JWT_PUBLIC_KEY", "none", "PAGEFAULT_JWT_ALGORITHMS names none, not a signing algorithm: with "
                                         "PAGEFAULT_JWT_PUBLIC_KEY use one or more of ES256"),
    ("PAGEFAULT_JWT_PUBLIC_KEY", "", "PAGEFAULT_JWT_ALGORITHMS is empty: with PAGEFAULT_JWT_PUBLIC_KEY"),
    ("PAGEFAULT_JWT_PUBLIC_KEY", "RS256,nope", "names nope, not a signing algorithm"),
])
def test_an_algorithm_list_that_verifies_nothing_is_refused_at_start(monkeypatch, key, algorithms, message):
    """``none`` or an empty list would start a server that refuses every token without saying why: the
    start is refused instead, in one line that names the algorithms the key can use."""
    monkeypatch.setenv(key, SECRET)
    monkeypatch.setenv("PAGEFAULT_JWT_ALGORITHMS", algorithms)
    with pytest.raises(ValueError) as e:
        AuthConfig.from_env()
    assert message in str(e.value) and "\n" not in str(e.value), str(e.value)
    if key == "PAGEFAULT_JWT_PUBLIC_KEY":
        allowed = str(e.value).partition("use one or more of ")[2]
        assert "RS256" in allowed and "HS256" not in allowed and "none" not in allowed, allowed
