"""Where a password reference may point: the secrets directories and variables the operator lends.

Whoever may create a changefeed chooses its URIs, so it chooses which file
(``password-file=``) and which environment variable (``password-env=``) of the
capture a password is read from, and which server it is then offered to. Left
open, a changefeed's author could have the captures read any file or variable
they can (the etcd client key, the admin token, another changefeed's password)
and hand it to a server of the author's choosing. ``cdc-server`` therefore
resolves only what its operator lends::

    password-file=PATH   PATH, symbolic links and '..' resolved, lies inside one of the
                         --secrets-dir directories (default /etc/cdc/secrets, where the
                         Helm chart mounts its credentials Secret)
    password-env=NAME    NAME starts with --secrets-env-prefix (default CDC_) and is not
                         one of the server's own variables (its etcd password, its settings)

The policy travels in the process environment (``CDC_SECRETS_DIR``, one path
or several joined by ':'; ``CDC_SECRETS_ENV_PREFIX``; ``CDC_SECRETS_ENV_RESERVED``,
names joined by ','): ``cdc-server`` installs it at start-up and every
process it starts (Spark's Python workers) inherits it, so the check holds
wherever a reference is resolved. A process without it (``cdcctl`` run by the
operator, on the operator's own files) is not restricted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cdc.errors import ConfigError

__all__ = [
    "DEFAULT_SECRETS_DIR",
    "DEFAULT_SECRETS_ENV_PREFIX",
    "DIRS_VARIABLE",
    "PREFIX_VARIABLE",
    "RESERVED_VARIABLE",
    "UNRESTRICTED",
    "SecretPolicy",
    "current_policy",
    "install_policy",
]

DEFAULT_SECRETS_DIR = "/etc/cdc/secrets"
DEFAULT_SECRETS_ENV_PREFIX = "CDC_"
DIRS_VARIABLE = "CDC_SECRETS_DIR"
PREFIX_VARIABLE = "CDC_SECRETS_ENV_PREFIX"
RESERVED_VARIABLE = "CDC_SECRETS_ENV_RESERVED"


@dataclass(frozen=True)
class SecretPolicy:
    """The files and variables password references may name.

    ``directories``: resolved absolute paths a ``password-file`` must lie in (None:
    any file; empty: none). ``env_prefix``: what a ``password-env`` name must start
    with (None: any). ``reserved_env``: names never lent, whatever the prefix.
    """

    directories: tuple[str, ...] | None
    env_prefix: str | None
    reserved_env: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls, directories: Iterable[str], env_prefix: str, reserved_env: Iterable[str] = ()
    ) -> SecretPolicy:
        """The policy of ``cdc-server``'s flags; directories resolved now (they need not exist)."""
        resolved = tuple(dict.fromkeys(str(Path(d).resolve()) for d in directories if d))
        return cls(resolved, env_prefix, frozenset(reserved_env))

    def check_file(self, path: str, field: str) -> None:
        """ConfigError naming ``<field>.password-file`` unless ``path`` is inside a directory."""
        if self.directories is None:
            return
        real = Path(path).resolve()
        if any(real.is_relative_to(d) and str(real) != d for d in self.directories):
            return
        where = (
            "in " + ", ".join(self.directories)
            if self.directories
            else "nowhere (no --secrets-dir is set)"
        )
        shown = path if str(real) == path else f"{path} (that is {real})"
        raise ConfigError(
            f"{field}.password-file",
            f"{shown} is not in a directory this cdc-server reads passwords from: it reads "
            f"them {where}. Put the password in a file there (the Helm chart mounts its "
            "credentials Secret there), or have the operator add the directory with "
            "cdc-server --secrets-dir DIR",
        )

    def check_env(self, name: str, field: str) -> None:
        """ConfigError naming ``<field>.password-env`` unless ``name`` is lent to changefeeds."""
        if name in self.reserved_env:
            raise ConfigError(
                f"{field}.password-env",
                f"{name} is one of this cdc-server's own settings (such as its etcd "
                "password) and is never lent to a changefeed; set the password in another "
                f"variable starting with {self.env_prefix or 'anything'}, or use password-file",
            )
        if self.env_prefix is None or name.startswith(self.env_prefix):
            return
        raise ConfigError(
            f"{field}.password-env",
            f"{name} is not a variable this cdc-server lends to changefeeds: their names start "
            f"with {self.env_prefix} (e.g. {self.env_prefix}SOURCE_PASSWORD). Rename the "
            "variable, or have the operator change cdc-server --secrets-env-prefix",
        )

    def environment(self) -> dict[str, str]:
        """The variables that carry this policy to a child process."""
        env: dict[str, str] = {}
        if self.directories is not None:
            env[DIRS_VARIABLE] = os.pathsep.join(self.directories)
        if self.env_prefix is not None:
            env[PREFIX_VARIABLE] = self.env_prefix
        if self.reserved_env:
            env[RESERVED_VARIABLE] = ",".join(sorted(self.reserved_env))
        return env


#: No restriction: a process the operator runs on the operator's own files.
UNRESTRICTED = SecretPolicy(None, None)


def install_policy(policy: SecretPolicy) -> None:
    """Makes ``policy`` this process's, and its future children's (``cdc-server`` at start)."""
    for name in (DIRS_VARIABLE, PREFIX_VARIABLE, RESERVED_VARIABLE):
        os.environ.pop(name, None)
    os.environ.update(policy.environment())


def current_policy() -> SecretPolicy:
    """The policy of this process, read from its environment (see the module's docstring)."""
    env = os.environ
    dirs = env.get(DIRS_VARIABLE)
    reserved = env.get(RESERVED_VARIABLE, "")
    return SecretPolicy(
        None if dirs is None else tuple(d for d in dirs.split(os.pathsep) if d),
        env.get(PREFIX_VARIABLE),
        frozenset(n for n in reserved.split(",") if n),
    )
