"""A Mosquitto with the shipped ACL, a password file made by the shipped script, and optionally TLS
with a CA generated for the test."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from wattbench_devkit import services

CLIENTS = ("bench-a", "bench-b", "wattbench-collector", "wattbench-sweep", "wattbench-telegraf")


def make_ca(workdir: Path, name: str = "ca") -> dict[str, Path]:
    """A throwaway CA and a broker certificate for 127.0.0.1, made with the openssl CLI."""
    if not shutil.which("openssl"):
        pytest.skip("openssl not installed")
    workdir.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt = workdir / f"{name}.key", workdir / f"{name}.crt"
    key, csr, crt = workdir / "broker.key", workdir / "broker.csr", workdir / "broker.crt"
    ext = workdir / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n")

    def run(*argv: str) -> None:
        subprocess.run(["openssl", *argv], check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        f"/CN=wattbench test {name}",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca_crt),
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        str(key),
        "-out",
        str(csr),
    )
    run(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca_crt),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(ext),
        "-out",
        str(crt),
    )
    return {"ca": ca_crt, "cert": crt, "key": key}


@pytest.fixture
def credentials(tmp_path: Path) -> dict[str, str]:
    if not shutil.which("mosquitto_passwd"):
        pytest.skip("mosquitto_passwd not installed: run scripts/provision.sh")
    passwd = tmp_path / "creds" / "passwd"
    passwd.parent.mkdir()
    script = services.REPO / "deploy" / "mosquitto" / "make-credentials.sh"
    subprocess.run(["bash", str(script), str(passwd), *CLIENTS], check=True, capture_output=True)
    secrets = {name: (passwd.parent / f"{name}.secret").read_text().strip() for name in CLIENTS}
    secrets["_file"] = str(passwd)
    return secrets


@pytest.fixture
def secure_broker(tmp_path: Path, credentials: dict[str, str]) -> Iterator[Callable[..., services.Mosquitto]]:
    """secure_broker(tls=False) -> a started Mosquitto with passwords and the shipped ACL."""
    started: list[services.Mosquitto] = []

    def make(tls: bool = False) -> services.Mosquitto:
        port = services.free_port()
        conf = [
            "per_listener_settings false",
            "allow_anonymous false",
            f"password_file {credentials['_file']}",
            f"acl_file {services.REPO / 'deploy' / 'mosquitto' / 'acl'}",
            f"listener {port} 127.0.0.1",
        ]
        broker_dir = tmp_path / f"broker{len(started)}"
        if tls:
            pki = make_ca(broker_dir / "pki")
            conf += [
                f"cafile {pki['ca']}",
                f"certfile {pki['cert']}",
                f"keyfile {pki['key']}",
                "tls_version tlsv1.2",
            ]
        broker = services.Mosquitto(broker_dir, port=port, extra_conf="\n".join(conf))
        if tls:
            broker.pki = pki  # type: ignore[attr-defined]
        started.append(broker.start())
        return broker

    yield make
    for broker in started:
        broker.stop()
