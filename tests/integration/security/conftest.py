"""Fixtures of the security tests: one set of certificates for the session."""

from __future__ import annotations

import shutil

import pytest
from security_helpers import Certs, make_certs


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A CA, a server certificate for 127.0.0.1/localhost, a client certificate, another CA."""
    if shutil.which("openssl") is None:
        pytest.fail(
            "the openssl command is needed to make test certificates: apt-get install openssl"
        )
    return make_certs(tmp_path_factory.mktemp("certs"))
