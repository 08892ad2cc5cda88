"""docs/security.md is true to the code: each block of ``export`` lines configures both drivers'
clients as the doc says (with a CA, certificate and encrypted key generated here standing in for
/etc/kafka, and password files for /run/secrets), and each command prints exactly the text block
that follows it."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import streamkit as sk
from streamkit.transport.security import aiokafka_common, confluent_common
from tests.unit.transport.test_tls_misconfiguration import pki  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[3]
DOC = (ROOT / "docs" / "security.md").read_text()
BLOCKS = re.findall(r"```(sh|text)\n(.*?)```", DOC, re.S)
ENV_BLOCKS = [body for kind, body in BLOCKS if kind == "sh" and body.startswith("export ")]
COMMANDS = [(body.strip(), BLOCKS[i + 1][1]) for i, (kind, body) in enumerate(BLOCKS)
            if kind == "sh" and not body.startswith("export ")]


def test_the_doc_has_its_blocks():
    assert len(ENV_BLOCKS) == 2 and len(COMMANDS) == 2
    assert all(BLOCKS[i + 1][0] == "text" for i, (kind, body) in enumerate(BLOCKS)
               if kind == "sh" and not body.startswith("export "))


@pytest.mark.parametrize("block", ENV_BLOCKS, ids=["sasl_ssl", "mtls"])
def test_each_setup_configures_both_drivers(block, pki, tmp_path):  # noqa: F811
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "kafka-password").write_text("scram-pw-71\n")
    (secrets / "key-password").write_text("key-pw-61\n")
    env: dict[str, str] = {}
    for line in block.strip().splitlines():
        name, _, value = shlex.split(line.removeprefix("export "), comments=True)[0].partition("=")
        env[name] = value.replace("/etc/kafka/", f"{pki}/").replace("/run/secrets/", f"{secrets}/")
    settings = sk.Settings.from_env(env)
    protocol = env["STREAMKIT_SECURITY_PROTOCOL"]
    native = confluent_common(settings)
    aio = aiokafka_common(settings)  # loads the CA, and the encrypted key with its password
    assert settings.effective_security_protocol == protocol == aio["security_protocol"]
    assert native["security.protocol"] == protocol.lower() and native["bootstrap.servers"] == env["STREAMKIT_BROKER"]
    assert native["ssl.ca.location"] == f"{pki}/ca.pem"
    if "SASL" in protocol:
        assert native["sasl.password"] == aio["sasl_plain_password"] == "scram-pw-71"
        assert native["sasl.mechanism"] == aio["sasl_mechanism"] == env["STREAMKIT_SASL_MECHANISM"]
    else:
        assert native["ssl.key.password"] == "key-pw-61" and native["ssl.certificate.location"] == f"{pki}/client.pem"


@pytest.mark.parametrize("command, expected", COMMANDS, ids=["misconfigured", "acls"])
def test_each_command_prints_what_the_doc_shows(command, expected):
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMKIT_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    out = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    failing = expected.startswith("streamkit: ")
    assert out.returncode == (2 if failing else 0), out.stderr
    assert (out.stderr if failing else out.stdout) == expected, (out.stdout, out.stderr)
