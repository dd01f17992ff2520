"""RSA key pairs for the ssh Job plugin, made by OpenSSH's ssh-keygen.

Volcano generates a 2048-bit RSA key (PKCS#1 PEM private key, OpenSSH public key).  The ``cryptography``
package is not among Scoria's dependencies, so the same pair comes from ``ssh-keygen -m PEM``.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from proto.errors import InputError

BITS = 2048


def ssh_keygen() -> tuple[str, str]:
    """(private key PEM, public key line); InputError when ssh-keygen is missing or fails."""
    program = shutil.which("ssh-keygen")
    if program is None:
        raise InputError("the ssh Job plugin needs ssh-keygen (OpenSSH) to make its key pair; install openssh-client "
                         "or give --ssh-private-key and --ssh-public-key")
    with tempfile.TemporaryDirectory(prefix="scoria-ssh-") as tmp:
        path = Path(tmp) / "id_rsa"
        result = subprocess.run([program, "-q", "-t", "rsa", "-b", str(BITS), "-m", "PEM", "-N", "", "-C", "",
                                 "-f", str(path)], capture_output=True, text=True, timeout=60, check=False)
        if result.returncode != 0:
            raise InputError(f"ssh-keygen failed: {result.stderr.strip() or result.returncode}")
        return path.read_text(), path.with_suffix(".pub").read_text()
