"""Wrong input to the installed `wattbench` command: every row gets one line naming the problem and
its documented exit code, never a traceback, and a command that reads never creates a file.

Exit codes (docs/guide.md): 1 invalid, 2 usage or configuration, 3 broker or store unreachable,
4 workload could not run, 130 interrupted."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from wattbench.mqttconn import CONNECT_TIMEOUT_S
from wattbench_devkit import services

WATTBENCH = str(Path(sys.executable).with_name("wattbench"))
PY = sys.executable
FAST = ["--quiet", "--pre", "0.2", "--measure", "1", "--post", "0.1", "--gap", "0", "--levels", "100,50"]


def fast_but(*options: str) -> list[str]:
    """FAST without the options a row gives itself (an option given twice is refused)."""
    out: list[str] = []
    words = iter(FAST)
    for word in words:
        if word in options:
            next(words)
        else:
            out.append(word)
    return out


@dataclass
class Row:
    id: str
    argv: list[str]
    code: int
    fragment: str
    # paths (relative to the test folder) a read must not create
    not_created: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    # the line is all of stderr: no log line or traceback of a library around it
    alone: bool = False


ROWS = [
    # --db names an InfluxDB database: beside a SQLite store it was ignored, and the user read another
    # store than the one meant
    Row(
        "report-db-beside-a-sqlite-store",
        ["report", "latest", "--store", "{tmp}/x.sqlite", "--db", "lab"],
        2,
        "wattbench report: --db lab names an InfluxDB database, but the store is the SQLite file",
        ["x.sqlite"],
        alone=True,
    ),
    Row(
        "collect-db-beside-a-sqlite-store",
        ["collect", "--store", "{tmp}/x.sqlite", "--db", "lab", "--broker", "127.0.0.1:1"],
        2,
        "wattbench collect: --db lab names an InfluxDB database, but the store is the SQLite file",
        ["x.sqlite"],
        alone=True,
    ),
    # reading never creates a store
    Row(
        "report-missing-store",
        ["report", "latest", "--store", "{tmp}/missing.sqlite"],
        3,
        "no store at",
        ["missing.sqlite"],
    ),
    Row(
        "report-default-store-missing",
        ["report", "latest"],
        3,
        "no store at",
        ["state/wattbench.sqlite", "wattbench.sqlite"],
        {"WATTBENCH_STATE_DIR": "{tmp}/state"},
    ),
    Row(
        "status-missing-store",
        ["status", "--store", "{tmp}/missing.sqlite", "--state-dir", "{tmp}"],
        3,
        "no store at",
        ["missing.sqlite"],
    ),
    Row(
        "status-json-missing-store",
        ["status", "--json", "--store", "{tmp}/missing.sqlite", "--state-dir", "{tmp}"],
        3,
        "no store at",
        ["missing.sqlite"],
    ),
    # a folder is no store file, known as the option is read: a usage error, as the folder of a new one
    Row(
        "report-store-is-folder",
        ["report", "latest", "--store", "{tmp}"],
        2,
        "is a folder, not a SQLite file",
    ),
    # the cluster options without --workload slurm would otherwise run a one-host sweep
    Row(
        "sweep-slots-without-slurm", ["sweep", "--cluster-unit", "slots", "--ops-only"], 2, "--workload slurm"
    ),
    Row("sweep-placement-builtin", ["sweep", "--placement", "spread", "--ops-only"], 2, "--workload slurm"),
    # An option of another workload was ignored: the run went on without what the user asked for.
    Row(
        "sweep-workers-for-a-command",
        ["sweep", "--cmd", "true", "--workers", "4", "--ops-only"],
        2,
        "wattbench sweep: --workers: for the builtin workload only (this is command)",
        alone=True,
    ),
    Row(
        "sweep-copies-for-the-builtin",
        ["sweep", "--workload", "builtin", "--copies", "1,2", "--ops-only"],
        2,
        "wattbench sweep: --copies: for the concurrency workload only (this is builtin)",
        alone=True,
    ),
    Row(
        "sweep-ops-file-for-the-builtin",
        ["sweep", "--ops-file", "x.txt", "--ops-only"],
        2,
        "wattbench sweep: --ops-file: for the command workload only (this is builtin)",
        alone=True,
    ),
    Row("report-store-not-sqlite", ["report", "latest", "--store", "{tmp}/notes.txt"], 3, "not a database"),
    Row("report-store-unknown-scheme", ["report", "latest", "--store", "ftp://x/y"], 2, "give a file path"),
    Row("report-unknown-run", ["report", "nope", "--store", "{store}"], 2, "no run 'nope'"),
    # services down
    Row("report-influx-down", ["report", "latest", "--influx", "{down}"], 3, "does not answer"),
    Row("status-influx-down", ["status", "--influx", "{down}", "--state-dir", "{tmp}"], 3, "does not answer"),
    Row("sweep-influx-down", ["sweep", "--influx", "{down}", *FAST], 3, "does not answer"),
    # before the appliance, the collector and minutes of sweep, not after them
    Row("demo-influx-down", ["demo", "--influx", "{down}", "--quiet"], 3, "does not answer"),
    Row(
        "sweep-broker-down",
        ["sweep", "--store", "{store}", "--broker", "{down_broker}", *FAST],
        3,
        "unreachable",
        alone=True,
    ),
    # a suite checks its services as a sweep does, before its first worklet
    Row(
        "suite-influx-down", ["suite", "{tmp}/suite.toml", "--influx", "{down}", *FAST], 3, "does not answer"
    ),
    Row(
        "suite-broker-down",
        ["suite", "{tmp}/suite.toml", "--store", "{store}", "--broker", "{down_broker}", *FAST],
        3,
        "unreachable",
        alone=True,
    ),
    # the broker of WATTBENCH_BROKER, set for `collect`, is the sweep's too: checked, never ignored
    Row(
        "sweep-env-broker-down",
        ["sweep", "--store", "{store}", *FAST],
        3,
        "unreachable",
        env={"WATTBENCH_BROKER": "{down_broker}"},
        alone=True,
    ),
    Row(
        "suite-env-broker-down",
        ["suite", "{tmp}/suite.toml", "--store", "{store}", *FAST],
        3,
        "unreachable",
        env={"WATTBENCH_BROKER": "{down_broker}"},
        alone=True,
    ),
    # outputs checked before anything runs
    Row(
        "report-html-missing-folder",
        ["report", "latest", "--store", "{store}", "--html", "{tmp}/nope/r.html"],
        2,
        "does not exist",
    ),
    Row(
        "sweep-html-missing-folder",
        ["sweep", "--store", "{store}", "--html", "{tmp}/nope/r.html", *FAST],
        2,
        "--html: folder",
    ),
    Row(
        "sweep-json-out-missing-folder",
        ["sweep", "--store", "{store}", "--json-out", "{tmp}/nope/r.json", *FAST],
        2,
        "--json-out: folder",
    ),
    Row(
        "sweep-json-out-is-folder",
        ["sweep", "--store", "{store}", "--json-out", "{tmp}", *FAST],
        2,
        "is a folder",
    ),
    Row(
        "demo-html-missing-folder",
        ["demo", "--html", "{tmp}/nope/demo.html"],
        2,
        "does not exist",
    ),
    # arguments
    Row(
        "sweep-bad-run-id",
        ["sweep", "--store", "{store}", "--run", "Bad/Run", *FAST],
        2,
        "not a valid run id",
    ),
    Row("sweep-no-store", ["sweep", *FAST], 2, "--ops-only"),
    Row(
        "sweep-missing-store",
        ["sweep", "--store", "{tmp}/missing.sqlite", *FAST],
        3,
        "no store at",
        ["missing.sqlite"],
    ),
    Row("sweep-ops-only-with-store", ["sweep", "--store", "{store}", "--ops-only", *FAST], 2, "--ops-only"),
    Row(
        "sweep-password-file-missing",
        [
            "sweep",
            "--store",
            "{store}",
            "--broker",
            "{down_broker}",
            "--mqtt-password-file",
            "{tmp}/pw",
            *FAST,
        ],
        2,
        "no such file",
    ),
    Row(
        "sweep-bad-levels", ["sweep", "--store", "{store}", "--levels", "100,abc"], 2, "not a list of numbers"
    ),
    Row(
        "sweep-level-above-100", ["sweep", "--store", "{store}", "--levels", "150"], 2, "outside (0 %, 100 %]"
    ),
    Row("sweep-bad-copies", ["sweep", "--store", "{store}", "--copies", "x"], 2, "--copies"),
    Row(
        "sweep-ca-not-a-certificate",
        ["sweep", "--store", "{store}", "--broker", "{down_broker}", "--mqtt-ca", "{tmp}/notes.txt", *FAST],
        2,
        "not a PEM CA certificate",
    ),
    Row("report-bad-channel", ["report", "latest", "--store", "{store}", "--channel", "x"], 2, "bad channel"),
    # device and channel ids are lower case: say so, with the id as it would be
    Row(
        "report-channel-in-capitals",
        ["report", "latest", "--store", "{store}", "--channel", "SIM-01/Sim"],
        2,
        "bad channel 'SIM-01/Sim': ids are lower case (sim-01/sim?)",
    ),
    Row(
        "report-bad-clock-offset",
        ["report", "latest", "--store", "{store}", "--clock-offset", "a=b"],
        2,
        "bad clock offset",
    ),
    Row("collect-bad-broker", ["collect", "--broker", "127.0.0.1:x"], 2, "not a number"),
    # nothing listens: the reason is the refusal, not a broker that does not answer
    Row(
        "collect-broker-refuses",
        ["collect", "--config", "{tmp}/fast.toml", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        3,
        "within 2 s (Connection refused)",
    ),
    # the broker is asked before the store is opened: a wrong address creates no store file
    Row(
        "collect-broker-down-creates-no-store",
        [
            "collect",
            "--config",
            "{tmp}/fast.toml",
            "--broker",
            "{down_broker}",
            "--state-dir",
            "{tmp}/st",
            "--store",
            "{tmp}/new.sqlite",
        ],
        3,
        "wattbench collect: cannot reach the MQTT broker at {down_broker} within 2 s (Connection refused)",
        ["new.sqlite", "st/wattbench.sqlite"],
    ),
    # a typo in the store's folder made a new store there, silently: the folder must exist
    Row(
        "collect-store-in-a-missing-folder",
        [
            "collect",
            "--broker",
            "{down_broker}",
            "--state-dir",
            "{tmp}/st",
            "--store",
            "{tmp}/nodir/x.sqlite",
        ],
        2,
        "wattbench collect: argument --store: '{tmp}/nodir/x.sqlite': no folder {tmp}/nodir "
        "(nothing was created)",
        ["nodir", "st"],
    ),
    Row(
        "collect-store-in-a-missing-folder-from-the-environment",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: WATTBENCH_STORE {tmp}/nodir/x.sqlite: no folder {tmp}/nodir (nothing was created)",
        ["nodir", "st"],
        env={"WATTBENCH_STORE": "{tmp}/nodir/x.sqlite"},
        alone=True,
    ),
    Row(
        "demo-store-in-a-missing-folder",
        ["demo", "--store", "sqlite://{tmp}/nodir/d.sqlite"],
        2,
        "wattbench demo: argument --store: 'sqlite://{tmp}/nodir/d.sqlite': no folder {tmp}/nodir "
        "(nothing was created)",
        ["nodir"],
    ),
    # two outputs into one file: the second overwrote the first, silently
    Row(
        "sweep-two-outputs-one-file",
        ["sweep", "--store", "{store}", "--json-out", "{tmp}/r.out", "--html", "{tmp}/./r.out", *FAST],
        2,
        "wattbench sweep: --json-out and --html both name {tmp}/r.out: each output needs a file of its own",
        ["r.out"],
        alone=True,
    ),
    Row(
        "report-two-outputs-one-file",
        ["report", "latest", "--store", "{store}", "--json-out", "r.out", "--html", "{tmp}/r.out"],
        2,
        "wattbench report: --json-out and --html both name {tmp}/r.out: each output needs a file of its own",
        ["r.out"],
        alone=True,
    ),
    # a plan of 445,000 years started its load: an interval is at most a day
    Row(
        "sweep-measure-beyond-a-day",
        ["sweep", "--store", "{store}", "--cmd", "true", *fast_but("--measure"), "--measure", "1e12"],
        2,
        "wattbench sweep: --measure: must be at most 86400 s (a day), got 1000000000000.0",
        alone=True,
    ),
    Row(
        "suite-pre-beyond-a-day",
        ["suite", "{tmp}/suite.toml", "--store", "{store}", *fast_but("--pre"), "--pre", "1e9"],
        2,
        "wattbench suite: --pre: must be at most 86400 s (a day), got 1000000000.0",
        alone=True,
    ),
    # a state folder that is not there (or a file) read as one with no collectors, exit 0
    Row(
        "status-state-dir-missing",
        ["status", "--store", "{store}", "--state-dir", "{tmp}/nostate"],
        2,
        "argument --state-dir: {tmp}/nostate: no such folder",
        ["nostate"],
    ),
    Row(
        "status-state-dir-is-a-file",
        ["status", "--store", "{store}", "--state-dir", "{tmp}/notes.txt"],
        2,
        "argument --state-dir: {tmp}/notes.txt: a file, not a folder",
    ),
    # a folder no file can be made in, whoever runs it (root's access() says yes for /proc)
    Row("sweep-html-into-proc", ["sweep", "--store", "{store}", "--html", "/proc/r.html", *FAST], 2, "/proc"),
    Row(
        "collect-bad-influx-url",
        ["collect", "--influx", "influx:8086"],
        2,
        "influx:8086: not an http:// or https:// address",
    ),
    # the /metrics address is bound before the store is created or the broker asked (docs/prometheus.md)
    Row(
        "collect-metrics-address-in-use",
        ["collect", "--broker", "{down_broker}", "--metrics", "127.0.0.1:{taken}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: cannot serve /metrics on 127.0.0.1:{taken}: [Errno 98] Address already in use",
        ["st"],
        alone=True,
    ),
    # a configuration mistake is the command's one line, naming the setting as it was typed
    Row(
        "collect-unknown-key-in-a-table",
        ["collect", "--config", "{tmp}/brokr.toml", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: unknown setting [mqtt] brokr in {tmp}/brokr.toml (did you mean broker?)",
        ["st"],
        alone=True,
    ),
    # a store setting SQLite refuses was exit 4 after two log lines; a worker count no machine has
    # started 117 processes before the broker was asked
    Row(
        "collect-sqlite-sync-unknown",
        ["collect", "--config", "{tmp}/sync.toml", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: [store] sqlite_sync in {tmp}/sync.toml 'fast': use FULL, NORMAL or EXTRA",
        ["st"],
        alone=True,
    ),
    Row(
        "collect-validate-workers-too-many",
        ["collect", "--config", "{tmp}/workers.toml", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: [collector] validate_workers in {tmp}/workers.toml 1000: use -1 (one per spare "
        "core), 0 (check in-process) or 1 to 64",
        ["st"],
        alone=True,
    ),
    # a broker given to the demo that is not there took 30 s and a wrapped line on stdout, later 5 s
    Row(
        "demo-broker-down",
        ["demo", "--broker", "{down_broker}"],
        3,
        "wattbench demo: MQTT broker {down_broker} unreachable: Connection refused",
        alone=True,
    ),
    # the same mistake through the environment was exit 3 after a warning, not the option's exit 2
    Row(
        "sweep-broker-from-the-environment",
        ["sweep", "--ops-only", "--levels", "100"],
        2,
        "wattbench sweep: WATTBENCH_BROKER: broker 'mqtt:/x': a path does not belong in a broker address",
        env={"WATTBENCH_BROKER": "mqtt:/x"},
        alone=True,
    ),
    # A value given through the environment is checked as the option is, and gets the option's exit 2
    # naming the variable: a malformed InfluxDB address was exit 3 ("unknown store"), a state folder
    # that is a file was exit 1 in `status` and exit 4 in `collect`, and `collect` ran on with a store
    # address it could never open.
    Row(
        "report-influx-url-from-the-environment",
        ["report", "latest"],
        2,
        "wattbench report: WATTBENCH_INFLUX_URL: htp://x: not an http:// or https:// address",
        env={"WATTBENCH_INFLUX_URL": "htp://x"},
        alone=True,
    ),
    # WATTBENCH_INFLUX_URL is an InfluxDB address, as --influx is: "notaurl" was taken for a SQLite
    # file and refused as "no store at notaurl (give --store or --influx ...)", naming neither.
    Row(
        "report-influx-url-from-the-environment-not-a-url",
        ["report", "latest"],
        2,
        "wattbench report: WATTBENCH_INFLUX_URL: notaurl: not an http:// or https:// address",
        env={"WATTBENCH_INFLUX_URL": "notaurl"},
        alone=True,
    ),
    Row(
        "status-influx-url-from-the-environment-not-a-url",
        ["status", "--state-dir", "{tmp}"],
        2,
        "wattbench status: WATTBENCH_INFLUX_URL: notaurl: not an http:// or https:// address",
        env={"WATTBENCH_INFLUX_URL": "notaurl"},
        alone=True,
    ),
    # a store the environment names, missing: the variable is named, not only the options
    Row(
        "report-store-from-the-environment-missing",
        ["report", "latest"],
        3,
        "wattbench report: WATTBENCH_STORE: no store at {tmp}/nosuch.sqlite (give --store or --influx; "
        "nothing was created)",
        ["nosuch.sqlite"],
        env={"WATTBENCH_STORE": "{tmp}/nosuch.sqlite"},
        alone=True,
    ),
    Row(
        "status-store-from-the-environment-missing",
        ["status", "--state-dir", "{tmp}"],
        3,
        "wattbench status: WATTBENCH_STORE: no store at {tmp}/nosuch.sqlite (give --store or --influx; "
        "nothing was created)",
        ["nosuch.sqlite"],
        env={"WATTBENCH_STORE": "{tmp}/nosuch.sqlite"},
        alone=True,
    ),
    Row(
        "status-state-dir-from-the-environment-is-a-file",
        ["status"],
        2,
        "wattbench status: WATTBENCH_STATE_DIR: {tmp}/notes.txt is a file, not a folder",
        env={"WATTBENCH_STATE_DIR": "{tmp}/notes.txt"},
        alone=True,
    ),
    Row(
        "collect-state-dir-from-the-environment-is-a-file",
        ["collect", "--broker", "{down_broker}"],
        2,
        "wattbench collect: WATTBENCH_STATE_DIR: {tmp}/notes.txt is a file, not a folder",
        env={"WATTBENCH_STATE_DIR": "{tmp}/notes.txt"},
        alone=True,
    ),
    Row(
        "collect-spool-from-the-environment-is-a-file",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: WATTBENCH_SPOOL_DIR: {tmp}/notes.txt is a file, not a folder",
        ["st"],
        env={"WATTBENCH_SPOOL_DIR": "{tmp}/notes.txt"},
        alone=True,
    ),
    Row(
        "collect-state-dir-without-its-parent",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/nodir/st"],
        2,
        "wattbench collect: argument --state-dir: {tmp}/nodir/st: no folder {tmp}/nodir (nothing was created)",
        ["nodir"],
        alone=True,
    ),
    Row(
        "collect-spool-without-its-parent",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st", "--spool", "{tmp}/nodir/sp"],
        2,
        "wattbench collect: --spool: {tmp}/nodir/sp: no folder {tmp}/nodir (nothing was created)",
        ["nodir", "st"],
        alone=True,
    ),
    # An empty value read as "not given": the default id (another collector's session) or the default
    # state folder was taken without a word.
    # ...but a spool inside a state folder still to be made is made with it
    Row(
        "collect-spool-inside-a-new-state-dir",
        [
            "collect",
            "--config",
            "{tmp}/fast.toml",
            "--broker",
            "{down_broker}",
            "--state-dir",
            "{tmp}/st",
            "--spool",
            "{tmp}/st/spool",
        ],
        3,
        "wattbench collect: cannot reach the MQTT broker at {down_broker} within 2 s",
    ),
    Row(
        "collect-empty-id",
        ["collect", "--id", "", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "argument --id: must not be empty",
        ["st"],
        alone=True,
    ),
    Row(
        "collect-empty-state-dir",
        ["collect", "--state-dir", "", "--broker", "{down_broker}"],
        2,
        "argument --state-dir: empty path",
        alone=True,
    ),
    Row(
        "collect-empty-spool",
        ["collect", "--spool", "", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "argument --spool: empty path",
        ["st"],
        alone=True,
    ),
    Row(
        "collect-store-from-the-environment",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: WATTBENCH_STORE: 'htp://x': give a file path, sqlite:///path or http(s)://host:port",
        ["st"],
        env={"WATTBENCH_STORE": "htp://x"},
        alone=True,
    ),
    # a wait of 1e300 s after the last level would never end (ops-only waits for nothing, so say it
    # once, for every command that waits)
    Row(
        "sweep-wait-data-absurd",
        ["sweep", "--ops-only", *FAST, "--wait-data", "1e300"],
        2,
        "argument --wait-data: ",
        alone=True,
    ),
    Row(
        "suite-wait-data-absurd",
        ["suite", "{tmp}/suite.toml", "--ops-only", "--wait-data", "86401"],
        2,
        "argument --wait-data: ",
        alone=True,
    ),
    # a CA file named by the environment or the file was an internal error (exit 1); the option's was 2
    Row(
        "collect-ca-from-the-environment-missing",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: WATTBENCH_MQTT_CA: {tmp}/none.pem: no such file",
        ["st"],
        env={"WATTBENCH_MQTT_CA": "{tmp}/none.pem"},
        alone=True,
    ),
    Row(
        "collect-hmac-keys-from-the-environment-missing",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: WATTBENCH_HMAC_KEYS: {tmp}/none.json: no such file",
        ["st"],
        env={"WATTBENCH_HMAC_KEYS": "{tmp}/none.json"},
        alone=True,
    ),
    # a state folder named in the file or the environment that is not there read as "no device
    # accounting found", exit 1; the option's is exit 2
    Row(
        "status-state-dir-from-the-environment-missing",
        ["status"],
        2,
        "wattbench status: WATTBENCH_STATE_DIR: {tmp}/nost: no such folder",
        env={"WATTBENCH_STATE_DIR": "{tmp}/nost"},
        alone=True,
    ),
    # a CA file that is no certificate, from the environment or the file: exit 3 "TLS:
    # NO_CERTIFICATE_OR_CRL_FOUND" at the first connect, naming neither (the option's was exit 2)
    Row(
        "collect-ca-not-a-certificate-from-the-environment",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: WATTBENCH_MQTT_CA: {tmp}/notes.txt: not a PEM CA certificate",
        ["st"],
        env={"WATTBENCH_MQTT_CA": "{tmp}/notes.txt"},
        alone=True,
    ),
    Row(
        "collect-ca-not-a-certificate-in-the-file",
        ["collect", "--config", "{tmp}/ca.toml", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: [mqtt] tls_ca in {tmp}/ca.toml: {tmp}/notes.txt: not a PEM CA certificate",
        ["st"],
        alone=True,
    ),
    # a password file that is a folder was "cannot read secret file X: Is a directory", naming no setting
    Row(
        "collect-password-file-a-folder-from-the-environment",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: WATTBENCH_MQTT_PASSWORD_FILE: {tmp} is a folder, not a file",
        ["st"],
        env={"WATTBENCH_MQTT_PASSWORD_FILE": "{tmp}"},
        alone=True,
    ),
    Row(
        "sweep-password-file-a-folder",
        ["sweep", "--ops-only", *FAST, "--mqtt-password-file", "{tmp}"],
        2,
        "argument --mqtt-password-file: {tmp} is a folder, not a file",
    ),
    # the workload's file was "cannot read nosuch.toml", naming no option
    Row(
        "sweep-workload-config-missing",
        ["sweep", "--ops-only", *FAST, "--workload-config", "nosuch.toml"],
        2,
        "argument --workload-config: nosuch.toml: no such file",
    ),
    Row(
        "suite-file-a-folder",
        ["suite", "{tmp}", "--ops-only"],
        2,
        "argument FILE: {tmp} is a folder, not a file",
    ),
    # a suite file that is not UTF-8 was "'utf-8' codec can't decode byte 0xff ...", naming no file
    Row(
        "suite-file-not-utf8",
        ["suite", "{tmp}/binary.toml", "--ops-only"],
        2,
        "wattbench suite: {tmp}/binary.toml: not UTF-8 text",
        alone=True,
    ),
    # float() reads "1_0" as 10 and "５" (full-width) as 5: a window ten times the one meant
    Row(
        "sweep-number-with-underscore",
        ["sweep", "--ops-only", "--measure", "1_0"],
        2,
        "'1_0' is not a number",
    ),
    Row("sweep-whole-number-with-underscore", ["sweep", "--ops-only", "--workers", "1_0"], 2, "'1_0' is not"),
    # 100000 worker processes were started one after the other (load average 34 on 2 cores) and the
    # first window never came
    # --years was checked only beside --tariff: 0 and -1 were taken, and report re-scored with them
    Row(
        "sweep-years-zero",
        ["sweep", "--ops-only", "--years", "0"],
        2,
        "wattbench sweep: argument --years: must be a number of years above 0 and at most 100, not 0",
        alone=True,
    ),
    Row(
        "report-years-negative",
        ["report", "latest", "--store", "{store}", "--years", "-1"],
        2,
        "wattbench report: argument --years: must be a number of years above 0 and at most 100, not -1",
        alone=True,
    ),
    # was "phase names repeat: ['c1', 'c1', 'idle']", the plan's own words
    Row(
        "sweep-copies-repeated",
        ["sweep", "--ops-only", "--workload", "concurrency", "--job", "true", "--copies", "1,1"],
        2,
        "wattbench sweep: argument --copies: copy count 1 is given twice: each count is one level (1,1)",
        alone=True,
    ),
    Row(
        "sweep-copies-repeated-in-the-workload-file",
        ["sweep", "--ops-only", "--workload-config", "{tmp}/copies.toml"],
        2,
        "wattbench sweep: {tmp}/copies.toml: copies: copy count 1 is given twice: each count is one level",
        alone=True,
    ),
    # an empty label made headers of "/s" and "Power Ratio (/s per W)"
    Row(
        "score-empty-ops-label",
        ["score", "{tmp}/table.csv", "--ops-label", ""],
        2,
        "wattbench score: argument --ops-label: must not be empty",
        alone=True,
    ),
    Row(
        "appliance-sim-and-config",
        ["appliance", "--sim", "--config", "{tmp}/twice.json"],
        2,
        "wattbench appliance: give --sim or --config, not both: --config runs the meters its file names",
        alone=True,
    ),
    # fio's file in a folder that is not there ended the run after its start with exit 4
    Row(
        "sweep-fio-file-in-no-folder",
        ["sweep", "--ops-only", "--workload-config", "{tmp}/fio.toml"],
        2,
        "wattbench sweep: {tmp}/fio.toml: file: folder '{tmp}/nodir' does not exist",
        ["nodir"],
        alone=True,
    ),
    # the whole sweep ran (12 minutes for a rehearsal's 30 s windows) to end "required spec" at its end
    Row(
        "sweep-require-spec-with-short-windows",
        ["sweep", "--ops-only", "--require", "spec", "--measure", "30"],
        2,
        "wattbench sweep: --require spec: SPECpower's measurement windows are 240 s; this run's are 30 s "
        "(--measure)",
        alone=True,
    ),
    Row(
        "suite-require-eehpc-with-short-windows",
        ["suite", "{tmp}/suite.toml", "--ops-only", "--require", "eehpc-l1", "--measure", "5"],
        2,
        "wattbench suite: --require eehpc-l1: the EE HPC WG's windows are at least 60 s; this run's are 5 s "
        "(--measure)",
        alone=True,
    ),
    Row(
        "sweep-workers-beyond-the-cores",
        ["sweep", "--ops-only", "--workers", "100000"],
        2,
        "wattbench sweep: argument --workers: '100000': more than 8 worker processes per core",
    ),
    Row(
        "demo-workers-beyond-the-cores",
        ["demo", "--workers", "100000"],
        2,
        "wattbench demo: argument --workers: '100000': more than 8 worker processes per core",
    ),
    Row(
        "sweep-workload-config-workers-beyond-the-cores",
        ["sweep", "--ops-only", "--workload-config", "{tmp}/many.toml"],
        2,
        "wattbench sweep: {tmp}/many.toml: builtin workload: workers 100000: more than 8 worker processes per core",
    ),
    Row("sweep-levels-with-underscore", ["sweep", "--ops-only", "--levels", "1_00,50"], 2, "--levels"),
    Row(
        "sweep-number-in-other-digits",
        ["sweep", "--ops-only", "--wait-data", "５"],
        2,
        "'５' is not a number",
    ),
    # the sweep published over plain MQTT whatever WATTBENCH_MQTT_CA said (collect honoured it)
    Row(
        "sweep-ca-from-the-environment",
        ["sweep", "--ops-only", *FAST, "--broker", "{down_broker}"],
        2,
        "wattbench sweep: WATTBENCH_MQTT_CA: {tmp}/none.pem: no such file",
        env={"WATTBENCH_MQTT_CA": "{tmp}/none.pem"},
        alone=True,
    ),
    Row(
        "collect-misspelt-table",
        ["collect", "--config", "{tmp}/colector.toml", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: unknown table [colector] in {tmp}/colector.toml (did you mean [collector]?)",
        ["st"],
        alone=True,
    ),
    Row(
        "collect-bad-health-period-option",
        ["collect", "--health-period", "-1", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: --health-period must be a number of seconds above 0 and at most 86400, not -1.0",
        ["st"],
        alone=True,
    ),
    Row(
        "collect-bad-health-period-in-file",
        ["collect", "--config", "{tmp}/period.toml", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: [collector] health_period_s in {tmp}/period.toml must be a number of seconds",
        ["st"],
        alone=True,
    ),
    Row(
        "collect-env-neither-true-nor-false",
        ["collect", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: WATTBENCH_HMAC_REQUIRE: 'maybe' is not a valid true or false",
        ["st"],
        {"WATTBENCH_HMAC_REQUIRE": "maybe"},
        alone=True,
    ),
    Row(
        "collect-hmac-keys-missing",
        ["collect", "--hmac-keys", "{tmp}/keys.json", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: --hmac-keys: {tmp}/keys.json: no such file",
        ["st"],
        alone=True,
    ),
    Row(
        "collect-hmac-keys-not-json",
        ["collect", "--hmac-keys", "{tmp}/notes.txt", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: --hmac-keys {tmp}/notes.txt: not JSON",
        ["st"],
        alone=True,
    ),
    # a device given two keys: the last was checked, without a word
    Row(
        "collect-hmac-keys-device-twice",
        ["collect", "--hmac-keys", "{tmp}/twokeys.json", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: --hmac-keys {tmp}/twokeys.json: not JSON (duplicate key 'sim-01')",
        ["st"],
        alone=True,
    ),
    Row(
        "collect-plugs-missing",
        ["collect", "--plugs", "{tmp}/plugs.toml", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: --plugs: {tmp}/plugs.toml: no such file",
        ["st"],
        alone=True,
    ),
    Row("broker-bad-port", ["broker", "--port", "99999"], 2, "outside 0..65535"),
    # a value the core refuses is named by the option that gave it, not by the core's field
    Row(
        "sweep-min-inlet-out-of-range",
        ["sweep", "--store", "{store}", "--min-inlet", "60", *FAST],
        2,
        "wattbench sweep: --min-inlet: must be 0..50 °C, got 60.0",
        alone=True,
    ),
    Row(
        "sweep-too-few-calibrations",
        ["sweep", "--store", "{store}", "--calibrations", "2", *FAST],
        2,
        "wattbench sweep: --calibrations: must be 3..10 intervals, got 2",
        alone=True,
    ),
    Row(
        "sweep-negative-price",
        ["sweep", "--store", "{store}", "--price", "-5", *FAST],
        2,
        "wattbench sweep: argument --price: must be a number from 0 to 1e+15, got -5.0",
        alone=True,
    ),
    Row(
        "appliance-sim-hz-zero",
        ["appliance", "--sim", "--hz", "0", "--spool-dir", "{tmp}/app"],
        2,
        "wattbench appliance: --hz: must be a number in (0, 10000], got 0.0",
        alone=True,
    ),
    Row(
        "appliance-sim-idle-w-too-high",
        ["appliance", "--sim", "--idle-w", "1e9", "--spool-dir", "{tmp}/app"],
        2,
        "wattbench appliance: --idle-w: must be a number in [0, 10000000.0], got 1000000000.0",
        alone=True,
    ),
    Row(
        # A simulated server that draws less at full load than at idle: its efficiency curve would read
        # upside down in every report.
        "appliance-sim-peak-below-idle",
        ["appliance", "--sim", "--idle-w", "300", "--peak-w", "250", "--spool-dir", "{tmp}/app"],
        2,
        "wattbench appliance: --peak-w: must be at least idle_w (300.0), got 250.0",
        alone=True,
    ),
    # an offset that is no number of milliseconds ran the whole plan and then scored "+0 ms"
    Row(
        "sweep-clock-offset-nan",
        ["sweep", "--store", "{store}", "--cmd", "true", *FAST, "--clock-offset", "bench=nan"],
        2,
        "wattbench sweep: argument --clock-offset: bad clock offset 'bench=nan': the milliseconds must be a "
        "finite number within a day (86400000)",
        alone=True,
    ),
    Row(
        "report-clock-offset-beyond-a-day",
        ["report", "latest", "--store", "{store}", "--rescore", "--clock-offset", "bench=1e12"],
        2,
        "wattbench report: argument --clock-offset: bad clock offset 'bench=1e12': the milliseconds must be "
        "a finite number within a day (86400000)",
        alone=True,
    ),
    # report and compare read "latest" as the newest run: a run of that name could never be shown
    Row(
        "sweep-run-named-latest",
        ["sweep", "--store", "{store}", "--cmd", "true", *FAST, "--run", "latest"],
        2,
        "wattbench sweep: argument --run: 'latest' names the newest run in report and compare: give this run "
        "another id",
        alone=True,
    ),
    # the demo started its broker, collector and appliance, then met the plan's limit as an internal error
    Row(
        "demo-measure-beyond-a-day",
        ["demo", "--measure", "100000"],
        2,
        "wattbench demo: --measure: must be at most 86400 s (a day), got 100000.0",
        alone=True,
    ),
    # an empty value was taken as not given: every interface, or another device's id
    Row(
        "broker-empty-host",
        ["broker", "--host", "", "--port", "0"],
        2,
        "wattbench broker: argument --host: must not be empty",
        alone=True,
    ),
    Row(
        "appliance-empty-dev",
        ["appliance", "--sim", "--dev", " ", "--spool-dir", "{tmp}/app"],
        2,
        "wattbench appliance: argument --dev: must not be empty",
        ["app"],
        alone=True,
    ),
    Row(
        "appliance-sim-batch-ms-zero",
        ["appliance", "--sim", "--batch-ms", "0", "--spool-dir", "{tmp}/app"],
        2,
        "wattbench appliance: --batch-ms: must be an integer in [10, 600000], got 0",
        alone=True,
    ),
    # amqtt logs its own failure to start with a traceback; the command's one line is enough
    # a port in --host was looked up as a host name ("127.0.0.1:1883:1883 ... not known"), exit 3
    Row(
        "broker-host-with-a-port",
        ["broker", "--host", "127.0.0.1:{down_port}"],
        2,
        "argument --host: '127.0.0.1:{down_port}' holds a port: give it with --port",
        alone=True,
    ),
    Row("broker-port-taken", ["broker", "--port", "{taken}"], 3, "Address already in use", alone=True),
    Row(
        "broker-host-not-here",
        ["broker", "--host", "192.0.2.1", "--port", "{down_port}"],
        3,
        "cannot listen on 192.0.2.1:",
        alone=True,
    ),
    Row(
        "broker-host-not-here-any-port",
        ["broker", "--host", "192.0.2.1", "--port", "0"],
        3,
        "cannot listen on 192.0.2.1:",
        alone=True,
    ),
    Row(
        "broker-host-unknown",
        ["broker", "--host", "no-such-host.invalid", "--port", "{down_port}"],
        3,
        "cannot listen on no-such-host.invalid:",
        alone=True,
    ),
    # a --config file that cannot be read as what the command takes is named as given
    Row(
        "status-config-not-toml",
        ["status", "--config", "{tmp}/notes.txt", "--state-dir", "{tmp}"],
        2,
        "wattbench status: config file {tmp}/notes.txt is not valid TOML",
        alone=True,
    ),
    # An appliance's state folder is made, but not the folders above it: a typo in one of them left
    # the backlog and the sequence numbers in a tree nobody reads. A --truth file without its folder
    # was refused only after the state folder had been made.
    Row(
        "appliance-spool-dir-without-its-parent",
        ["appliance", "--sim", "--spool-dir", "{tmp}/nodir/sp"],
        2,
        "argument --spool-dir: {tmp}/nodir/sp: no folder {tmp}/nodir (nothing was created)",
        ["nodir"],
        alone=True,
    ),
    Row(
        "appliance-spool-dir-is-a-file",
        ["appliance", "--sim", "--spool-dir", "{tmp}/notes.txt"],
        2,
        "argument --spool-dir: {tmp}/notes.txt is a file, not a folder",
        alone=True,
    ),
    Row(
        "appliance-truth-without-its-folder",
        ["appliance", "--sim", "--spool-dir", "{tmp}/app", "--truth", "{tmp}/nodir/t.csv"],
        2,
        "argument --truth: folder '{tmp}/nodir' does not exist",
        ["app", "nodir"],
        alone=True,
    ),
    Row(
        "appliance-config-flash-dir-without-its-parent",
        ["appliance", "--config", "{tmp}/flash.json"],
        2,
        "wattbench appliance: --config {tmp}/flash.json: flash_dir {tmp}/nodir/fl: no folder {tmp}/nodir "
        "(nothing was created)",
        ["nodir"],
        alone=True,
    ),
    Row(
        "appliance-config-not-json",
        ["appliance", "--config", "{tmp}/notes.txt"],
        2,
        "wattbench appliance: --config {tmp}/notes.txt: not JSON",
        alone=True,
    ),
    # --json-out naming the measured program (a slip for mybench.json) wrote the result over it
    Row(
        "sweep-output-over-the-program-it-measures",
        [
            "sweep",
            "--ops-only",
            *FAST,
            "--workload",
            "command",
            "--cmd",
            "python3 mybench.py",
            "--json-out",
            "mybench.py",
        ],
        2,
        "is an input of this command: it would be overwritten",
        alone=True,
    ),
    # getaddrinfo wraps a port above 65535 (99999 is 34463): another server would have been asked
    Row(
        "estimate-prometheus-port-out-of-range",
        [
            "compare-estimate",
            "latest",
            "--store",
            "{store}",
            "--prometheus",
            "http://127.0.0.1:99999",
            "--query",
            "up",
        ],
        2,
        "argument --prometheus: http://127.0.0.1:99999: port 99999 is outside 1..65535",
    ),
    Row(
        "report-influx-port-out-of-range",
        ["report", "latest", "--influx", "http://127.0.0.1:99999"],
        2,
        "http://127.0.0.1:99999: port 99999 is outside 1..65535",
        alone=True,
    ),
    # the password in the address was printed, and the reason was a DNS error (user:pw@host read as host)
    Row(
        "estimate-prometheus-credentials",
        [
            "compare-estimate",
            "latest",
            "--store",
            "{store}",
            "--prometheus",
            "http://user:pw@127.0.0.1:9",
            "--query",
            "up",
        ],
        2,
        "argument --prometheus: http://***@127.0.0.1:9: credentials in the address are not supported",
    ),
    Row(
        "report-influx-credentials-not-echoed",
        ["report", "latest", "--influx", "http://user:pw@127.0.0.1:{down_port}"],
        3,
        "InfluxDB at http://***@127.0.0.1:",
        alone=True,
    ),
    # a workload file of another workload than --workload's: one side was dropped unseen
    Row(
        "sweep-workload-config-of-another-workload",
        [
            "sweep",
            "--ops-only",
            *FAST,
            "--workload",
            "command",
            "--cmd",
            "true",
            "--workload-config",
            "{tmp}/wl.toml",
        ],
        2,
        "wattbench sweep: --workload command: --workload-config {tmp}/wl.toml is a file of the builtin workload",
        alone=True,
    ),
    # argparse kept the last of an option given twice: `--levels 100 --levels 50` ran 50 % alone
    Row(
        "sweep-option-given-twice",
        ["sweep", "--ops-only", "--levels", "100", "--levels", "50"],
        2,
        "argument --levels: given twice (--levels 100, then --levels 50): give it once",
        alone=True,
    ),
    Row(
        "score-option-given-twice",
        ["score", "{tmp}/table.csv", "--expect", "1929", "--expect=5"],
        2,
        "argument --expect: given twice (--expect 1929, then --expect 5): give it once",
        alone=True,
    ),
    # a key given twice (a hand-merged config) was taken as its last value: another device id, broker
    # or calibration, silently
    Row(
        "appliance-config-key-twice",
        ["appliance", "--config", "{tmp}/twice.json"],
        2,
        "wattbench appliance: --config {tmp}/twice.json: not JSON (duplicate key 'dev')",
        alone=True,
    ),
    Row(
        "flash-config-key-twice",
        ["flash", "--port", "/dev/null", "--board", "esp32", "--config", "{tmp}/twice.json", "--dry-run"],
        2,
        "wattbench flash: --config {tmp}/twice.json: not JSON (duplicate key 'dev')",
        alone=True,
    ),
    Row(
        "appliance-config-not-an-object",
        ["appliance", "--config", "{tmp}/list.json"],
        2,
        "wattbench appliance: --config {tmp}/list.json: not a JSON object",
        alone=True,
    ),
    Row(
        "appliance-config-missing",
        ["appliance", "--config", "{tmp}/none.json"],
        2,
        "wattbench appliance: --config {tmp}/none.json: No such file or directory",
        alone=True,
    ),
    # the same load twice ("1" is 100 % as a fraction) was refused as "phase names repeat: [...]"
    Row(
        "sweep-level-twice",
        ["sweep", "--ops-only", *fast_but("--levels"), "--levels", "100,50,1"],
        2,
        "wattbench sweep: argument --levels: target load '1' is 100 % again (see wattbench sweep --help)",
        alone=True,
    ),
    Row("unknown-command", ["nosuch"], 2, "invalid choice"),
    # an option a subcommand does not know points to that subcommand's --help
    Row(
        "sweep-unknown-option",
        ["sweep", "--bogus"],
        2,
        "wattbench sweep: unrecognized arguments: --bogus (see wattbench sweep --help)",
        alone=True,
    ),
    Row(
        "report-unknown-option",
        ["report", "latest", "--store", "{store}", "--bogus", "1"],
        2,
        "wattbench report: unrecognized arguments: --bogus 1 (see wattbench report --help)",
        alone=True,
    ),
    # an option the command does not know, before its file, made argparse take the option's value for
    # the file: "argument FILE: 1: no such file", naming neither the option nor the mistake
    Row(
        "suite-unknown-option-before-its-file",
        ["suite", "--workers", "1", "{tmp}/suite.toml", "--store", "{store}"],
        2,
        "wattbench suite: unrecognized arguments: --workers (see wattbench suite --help)",
        alone=True,
    ),
    # the second offset of a device was taken, silently, and the report's "scored with" listed both
    Row(
        "sweep-clock-offset-twice-for-one-device",
        ["sweep", "--store", "{store}", "--clock-offset", "bench=5", "--clock-offset", "bench=6", *FAST],
        2,
        "wattbench sweep: --clock-offset bench is given twice (5 and 6)",
        alone=True,
    ),
    Row(
        "report-clock-offset-twice-for-one-device",
        ["report", "latest", "--store", "{store}", "--clock-offset", "bench=5", "--clock-offset", "bench=6"],
        2,
        "wattbench report: --clock-offset bench is given twice (5 and 6)",
        alone=True,
    ),
    # an option of another model was ignored: the cpu model ran, not 100 W
    Row(
        "appliance-watts-with-the-cpu-model",
        ["appliance", "--sim", "--model", "cpu", "--watts", "100", "--spool-dir", "{tmp}/sp"],
        2,
        "wattbench appliance: --watts is for the const and sine models, not cpu (--model)",
        ["sp"],
        alone=True,
    ),
    Row(
        "appliance-idle-w-with-the-const-model",
        ["appliance", "--sim", "--model", "const", "--idle-w", "10", "--spool-dir", "{tmp}/sp"],
        2,
        "wattbench appliance: --idle-w is for the cpu and steps models, not const (--model)",
        ["sp"],
        alone=True,
    ),
    # a password without a user name was never sent, and nothing said so
    Row(
        "sweep-password-without-a-user",
        [
            "sweep",
            "--store",
            "{store}",
            "--broker",
            "{down_broker}",
            "--mqtt-password-file",
            "{tmp}/notes.txt",
            *FAST,
        ],
        2,
        "wattbench sweep: --mqtt-password-file: a password needs a user name (--mqtt-user or "
        "WATTBENCH_MQTT_USER); without one it is not sent",
        alone=True,
    ),
    Row(
        "collect-password-without-a-user",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: WATTBENCH_MQTT_PASSWORD: a password needs a user name (--mqtt-user or "
        "WATTBENCH_MQTT_USER); without one it is not sent",
        ["st"],
        env={"WATTBENCH_MQTT_PASSWORD": "secret"},
        alone=True,
    ),
    # a store that is a folder: exit 4 after the broker was asked, three lines, a lock file and spool
    # folders left behind
    Row(
        "collect-store-is-a-folder",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st", "--store", "{tmp}"],
        2,
        "wattbench collect: argument --store: {tmp} is a folder, not a SQLite file",
        ["st"],
        alone=True,
    ),
    Row(
        "collect-store-from-the-environment-is-a-folder",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: WATTBENCH_STORE: {tmp} is a folder, not a SQLite file",
        ["st"],
        env={"WATTBENCH_STORE": "{tmp}"},
        alone=True,
    ),
    # the file's value, hidden by the option over it, was never checked: the next run without the
    # option would fail on it
    Row(
        "sweep-workload-file-value-under-an-option",
        ["sweep", "--ops-only", "--workload-config", "{tmp}/negative.toml", "--workers", "1", *FAST],
        2,
        "wattbench sweep: {tmp}/negative.toml: builtin workload: workers must be >= 1",
        alone=True,
    ),
    # the file was named twice: "--hmac-keys FILE: FILE: the key ..."
    Row(
        "collect-hmac-key-not-hex",
        [
            "collect",
            "--broker",
            "{down_broker}",
            "--state-dir",
            "{tmp}/st",
            "--hmac-keys",
            "{tmp}/nothex.json",
        ],
        2,
        "wattbench collect: --hmac-keys {tmp}/nothex.json: the key of device 'sim-01' is not hex",
        ["st"],
        alone=True,
    ),
    # the worklet was named twice: "worklet random: size_mb ..."
    Row(
        "suite-worklet-option-out-of-range",
        ["suite", "{tmp}/disk.toml", "--ops-only"],
        2,
        "wattbench suite: {tmp}/disk.toml: worklet random: size_mb must be 1 to 16777216, not -4",
        alone=True,
    ),
    # the form was right and the port was not: "use HOST:PORT" did not say which
    Row(
        "collect-metrics-port-out-of-range",
        ["collect", "--broker", "{down_broker}", "--state-dir", "{tmp}/st", "--metrics", "127.0.0.1:99999"],
        2,
        "'127.0.0.1:99999': port 99999 is outside 1..65535",
        ["st"],
        alone=True,
    ),
    # "1883 is not a valid text" did not say what to write
    Row(
        "collect-broker-as-a-number-in-the-file",
        ["collect", "--config", "{tmp}/number.toml", "--state-dir", "{tmp}/st"],
        2,
        "wattbench collect: [mqtt] broker in {tmp}/number.toml: 1883 is not text: put it in quotes",
        ["st"],
        alone=True,
    ),
    # the bad value was not said back: "report is 'stream' or 'total'"
    Row(
        "sweep-command-report-misspelt-in-the-file",
        ["sweep", "--ops-only", "--workload-config", "{tmp}/streem.toml"],
        2,
        "wattbench sweep: {tmp}/streem.toml: report: 'streem': use 'stream' or 'total'",
        alone=True,
    ),
    # 1e400 is infinite once read: "must be a number >= 0" named a bound it meets
    Row(
        "sweep-pre-infinite",
        ["sweep", "--ops-only", "--pre", "1e400"],
        2,
        "wattbench sweep: argument --pre: '1e400': must be a finite number",
        alone=True,
    ),
    Row(
        "top-unknown-option",
        ["--bogus"],
        2,
        "wattbench: unrecognized arguments: --bogus (see wattbench --help)",
    ),
    # no option is taken for another by its first letters: --json-o is not --json-out
    Row(
        "sweep-abbreviation-is-not-json-out",
        ["sweep", "--store", "{store}", "--json-o", "{tmp}/r.json", *FAST],
        2,
        "wattbench sweep: unrecognized arguments: --json-o {tmp}/r.json (did you mean --json-out?) "
        "(see wattbench sweep --help)",
        ["r.json"],
        alone=True,
    ),
    # --json prints to stdout; a file after it is meant for --json-out
    Row(
        "sweep-json-with-a-file",
        ["sweep", "--store", "{store}", "--json", "{tmp}/r.json", *FAST],
        2,
        "wattbench sweep: unrecognized arguments: {tmp}/r.json (did you mean --json-out {tmp}/r.json?) "
        "(see wattbench sweep --help)",
        ["r.json"],
        alone=True,
    ),
    Row(
        "report-abbreviated-store",
        ["report", "latest", "--sto", "{store}"],
        2,
        "unrecognized arguments: --sto {store} (did you mean --store?)",
        alone=True,
    ),
    # the workload
    Row("sweep-command-without-cmd", ["sweep", "--ops-only", "--workload", "command", *FAST], 2, "--cmd"),
    # a program that is not there is a mistake on the command line, found before anything runs
    Row(
        "sweep-command-not-found",
        ["sweep", "--store", "{store}", "--cmd", "{tmp}/no-such-program {{load}}", *FAST],
        2,
        "--cmd: cannot start '{tmp}/no-such-program': no such file",
        alone=True,
    ),
    Row(
        "sweep-command-not-on-path",
        ["sweep", "--store", "{store}", "--workload", "command", "--cmd", "mybenchh {{load}}", *FAST],
        2,
        "--cmd: cannot start 'mybenchh': no such program on PATH",
        alone=True,
    ),
    Row(
        "sweep-command-not-executable",
        ["sweep", "--store", "{store}", "--cmd", "{tmp}/notes.txt", *FAST],
        2,
        "--cmd: cannot start '{tmp}/notes.txt': not executable",
        alone=True,
    ),
    Row(
        "sweep-command-from-workload-config-not-found",
        ["sweep", "--store", "{store}", "--workload-config", "{tmp}/mybench.toml", *FAST],
        2,
        "{tmp}/mybench.toml: run: cannot start 'mybenchh': no such program on PATH",
        alone=True,
    ),
    # a template for the ops file that cannot be filled is known before the run, named as typed
    Row(
        "sweep-command-bad-ops-file-template",
        ["sweep", "--store", "{store}", "--cmd", "true", "--ops-file", "{tmp}/ops-{{nope", *FAST],
        2,
        "wattbench sweep: --ops-file: bad template",
        alone=True,
    ),
    # the ops file is read from a folder the command cannot create it in: known before the first phase
    Row(
        "sweep-command-ops-file-folder-missing",
        [
            "sweep",
            "--store",
            "{store}",
            "--cmd",
            "true",
            "--ops-file",
            "{tmp}/nodir/ops-{{level}}.txt",
            *FAST,
        ],
        2,
        "wattbench sweep: --ops-file: folder '{tmp}/nodir' does not exist",
        ["nodir"],
        alone=True,
    ),
    Row(
        "sweep-command-ops-file-folder-missing-in-workload-config",
        ["sweep", "--store", "{store}", "--workload-config", "{tmp}/opsfile.toml", *FAST],
        2,
        "{tmp}/opsfile.toml: ops_file: folder '{tmp}/nodir' does not exist",
        alone=True,
    ),
    Row(
        "sweep-command-ops-file-is-a-folder",
        ["sweep", "--store", "{store}", "--cmd", "true", "--ops-file", "{tmp}", *FAST],
        2,
        "wattbench sweep: --ops-file: {tmp} is a folder, not a file",
        alone=True,
    ),
    # a channel named twice would be summed twice: twice the power, and a result that looks plausible
    Row(
        "sweep-channel-named-twice",
        ["sweep", "--store", "{store}", "--channel", "bench/psu", "--channel", "bench/psu@srv1", *FAST],
        2,
        "wattbench sweep: --channel: bench/psu is named twice",
        alone=True,
    ),
    Row(
        "sweep-channel-named-as-power-and-inlet",
        ["sweep", "--store", "{store}", "--channel", "bench/psu", "--inlet", "bench/psu", *FAST],
        2,
        "wattbench sweep: --inlet: bench/psu is also named with --channel",
        alone=True,
    ),
    # an offset for a device the run does not measure is a typo: the device measured gets none at all
    Row(
        "sweep-clock-offset-for-a-device-not-measured",
        ["sweep", "--store", "{store}", "--channel", "bench/psu", "--clock-offset", "bnch=5", *FAST],
        2,
        "wattbench sweep: --clock-offset bnch=5: no channel of bnch is measured (the run's devices: bench)",
        alone=True,
    ),
    Row(
        "sweep-clock-offset-for-a-device-not-chosen",
        ["sweep", "--store", "{store}", "--clock-offset", "bnch=5", *FAST],
        2,
        "wattbench sweep: --clock-offset bnch=5: no channel of bnch is measured (the run's devices: bench)",
        alone=True,
    ),
    Row(
        "suite-channel-named-twice",
        [
            "suite",
            "{tmp}/suite.toml",
            "--store",
            "{store}",
            "--channel",
            "bench/psu",
            "--channel",
            "bench/psu",
            *FAST,
        ],
        2,
        "wattbench suite: --channel: bench/psu is named twice",
        alone=True,
    ),
    Row(
        "report-channel-named-twice",
        [
            "report",
            "latest",
            "--store",
            "{store}",
            "--rescore",
            "--channel",
            "bench/psu",
            "--channel",
            "bench/psu",
        ],
        2,
        "wattbench report: --channel: bench/psu is named twice",
        alone=True,
    ),
    # a setting the workload refuses as it is built is named as given: the option, or the file and key
    Row(
        "sweep-command-unknown-placeholder",
        ["sweep", "--ops-only", "--cmd", "true {{nope}}", *FAST],
        2,
        "wattbench sweep: --cmd: unknown placeholder 'nope' in 'true {{nope}}'",
        alone=True,
    ),
    Row(
        "sweep-command-unknown-placeholder-in-workload-config",
        ["sweep", "--ops-only", "--workload-config", "{tmp}/placeholder.toml", *FAST],
        2,
        "wattbench sweep: {tmp}/placeholder.toml: run: unknown placeholder 'nope'",
        alone=True,
    ),
    Row(
        "sweep-workload-config-unknown-key",
        ["sweep", "--ops-only", "--workload-config", "{tmp}/reprot.toml", *FAST],
        2,
        "wattbench sweep: {tmp}/reprot.toml: command workload: unknown settings ['reprot']",
        alone=True,
    ),
    Row(
        "sweep-concurrency-job-not-found",
        ["sweep", "--store", "{store}", "--workload", "concurrency", "--job", "mybenchh {{copy}}", *FAST],
        2,
        "--job: cannot start 'mybenchh': no such program on PATH",
        alone=True,
    ),
    Row(
        "sweep-command-fails-in-cal1",
        ["sweep", "--store", "{store}", "--cmd", PY + " -c 'import sys; sys.exit(3)'", *FAST],
        4,
        "workload failed during cal1: the command exited with status 3",
    ),
    # The count is checked where it is typed, in the option's own words: the firmware's "channels: must
    # be a list of 1 to 16 channels" spoke of a configuration the user never wrote.
    Row(
        "appliance-no-channels",
        ["appliance", "--sim", "--channels", "0"],
        2,
        "wattbench appliance: argument --channels: '0': must be a whole number >= 1 and <= 16",
        alone=True,
    ),
    # An empty name was taken as no name: the candidate kept its file's stem without a word.
    Row(
        "compare-empty-name",
        ["compare", "{tmp}/table.csv", "--name", ""],
        2,
        "wattbench compare: argument --name: must not be empty",
        alone=True,
    ),
    # argparse's own words, "ignored explicit argument 'yes'", read as if the value had been ignored.
    Row(
        "flag-with-a-value",
        ["score", "{tmp}/table.csv", "--json=yes"],
        2,
        "wattbench score: argument --json: takes no value (given 'yes')",
        alone=True,
    ),
    # A spreadsheet's export: capitalised names, or semicolons where a locale uses the comma for decimals.
    Row(
        "score-csv-capitalised-header",
        ["score", "{tmp}/caps.csv"],
        2,
        "column names are lower case: target, ops, power",
        alone=True,
    ),
    Row(
        "score-csv-semicolons",
        ["score", "{tmp}/semi.csv"],
        2,
        "the columns are separated by ';': use commas",
        alone=True,
    ),
    Row("help-unknown-command", ["help", "nosuch"], 2, "invalid choice: 'nosuch'", alone=True),
    # A host name DNS cannot hold was taken as an address, and paho's IDNA codec failed at connect: an
    # internal error in seven commands, an appliance retrying for ever.
    Row(
        "sweep-broker-empty-label",
        ["sweep", "--broker", "broker..lab", "--store", "{store}", *FAST],
        2,
        "wattbench sweep: argument --broker: broker 'broker..lab': an empty label in the host name",
        alone=True,
    ),
    Row(
        "collect-broker-empty-label-from-the-environment",
        ["collect", "--state-dir", "{tmp}/st"],
        2,
        "WATTBENCH_BROKER: broker '192.168..1': an empty label in the host name",
        ["st"],
        env={"WATTBENCH_BROKER": "192.168..1"},
        alone=True,
    ),
    Row(
        "appliance-broker-label-too-long",
        ["appliance", "--sim", "--broker", "a" * 64 + ".lab", "--count", "1"],
        2,
        "a label of the host name is longer than 63 characters",
        alone=True,
    ),
    # The simulated meter's options beside a --config file were accepted and ignored: the file's meters ran.
    *(
        Row(
            f"appliance-config-with{option}",
            ["appliance", "--config", "{tmp}/flash.json", option, value, "--count", "1"],
            2,
            f"wattbench appliance: {option} is for --sim; --config runs the meters its file names",
            alone=True,
        )
        for option, value in (("--hz", "1"), ("--channels", "3"), ("--model", "const"), ("--batch-ms", "100"))
    ),
    # An empty value read as none given, and the default was used without a word.
    Row(
        "status-empty-state-dir",
        ["status", "--state-dir", ""],
        2,
        "argument --state-dir: must not be empty",
        alone=True,
    ),
    Row(
        "collect-empty-store-in-the-file",
        ["collect", "--config", "{tmp}/emptystore.toml", "--state-dir", "{tmp}/st"],
        2,
        "[store] store in {tmp}/emptystore.toml: empty: give a value, or leave the key out for the default",
        ["st"],
        alone=True,
    ),
    # bytes that are no UTF-8 reach Python as surrogates, which the store's query could not encode
    Row(
        "report-run-id-not-utf8",
        ["report", "\udcff\udcfe", "--store", "{store}"],
        2,
        "is not a valid run id",
        alone=True,
    ),
    # 1000 copies of the built-in job are 1000 interpreters at once: about 20 GB, on two cores.
    Row(
        "sweep-builtin-copies-beyond-the-cores",
        ["sweep", "--ops-only", "--workload", "concurrency", "--job", "builtin:100", "--copies", "1,1000"],
        2,
        "wattbench sweep: --copies: 1000 copies of builtin:100: more than 8 copies per core",
        alone=True,
    ),
    Row(
        "sweep-worklet-copies-beyond-the-cores-in-the-workload-file",
        ["sweep", "--ops-only", "--workload-config", "{tmp}/manycopies.toml"],
        2,
        "wattbench sweep: {tmp}/manycopies.toml: copies: 5000 copies of worklet:sha256:10: more than 8",
        alone=True,
    ),
]


@pytest.fixture(scope="module")
def influx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[services.InfluxDB]:
    try:
        db = services.InfluxDB(tmp_path_factory.mktemp("influx"))
    except services.ServiceUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(exc))
    db.start()
    yield db
    db.stop()


# One appliance with one server-power channel, as its retained meta message describes it.
BENCH_META = {
    "v": 1,
    "dev": "bench",
    "fw": "0.1.0",
    "board": "host",
    "channels": [{"c": "psu", "meter": "sim", "q": ["W"], "hz": 1, "role": "power", "node": "srv1"}],
}


def make_store(path: Path | str, **options: Any) -> str:
    """A store as `wattbench collect` leaves it beside one live appliance: its metadata (one server-power
    channel) and a sample of now, so a sweep binds to that channel before its first phase."""
    import time

    from wattbench.store import open_store

    now = int(time.time() * 1000)
    store = open_store(str(path), **options)
    store.write_meta(BENCH_META, now - 60_000)
    store.write_samples(
        "bench", [{"s": i, "t": now - 5_000 + 1_000 * i, "c": "psu", "W": 100.0} for i in range(5)]
    )
    store.flush()
    store.close()
    return str(path)


def wattbench(
    argv: list[str], tmp: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, **(env or {}))
    for var in ("WATTBENCH_STORE", "WATTBENCH_INFLUX_URL", "WATTBENCH_STATE_DIR"):
        if env is None or var not in env:
            full_env.pop(var, None)
    full_env.setdefault("XDG_STATE_HOME", str(tmp / "xdg"))
    return subprocess.run(
        [WATTBENCH, *argv], capture_output=True, text=True, cwd=tmp, env=full_env, timeout=timeout
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_gets_one_line_and_its_exit_code(row: Row, tmp_path: Path) -> None:
    down = services.free_port()  # nothing listens there
    (tmp_path / "notes.txt").write_text("not a database\n")
    (tmp_path / "list.json").write_text("[1]\n")
    (tmp_path / "placeholder.toml").write_text('workload = "command"\nrun = "true {nope}"\n')
    (tmp_path / "reprot.toml").write_text('workload = "command"\nrun = "true"\nreprot = "total"\n')
    (tmp_path / "fast.toml").write_text("connect_timeout_s = 2\n")
    (tmp_path / "mybench.toml").write_text('workload = "command"\nrun = "mybenchh {load}"\n')
    (tmp_path / "opsfile.toml").write_text(
        f'workload = "command"\nrun = "true"\nops_file = "{tmp_path}/nodir/ops-{{level}}.txt"\n'
    )
    (tmp_path / "brokr.toml").write_text('[mqtt]\nbrokr = "127.0.0.1:1883"\n')
    (tmp_path / "sync.toml").write_text('[store]\nsqlite_sync = "fast"\n')
    (tmp_path / "workers.toml").write_text("[collector]\nvalidate_workers = 1000\n")
    (tmp_path / "colector.toml").write_text('[colector]\nid = "bench"\n')
    (tmp_path / "period.toml").write_text("[collector]\nhealth_period_s = 0\n")
    (tmp_path / "suite.toml").write_text('[[worklet]]\nworklet = "sha256"\nworkers = 1\n')
    (tmp_path / "mybench.py").write_text("print('ops=1')\n")
    (tmp_path / "wl.toml").write_text('workload = "builtin"\n')
    (tmp_path / "many.toml").write_text('workload = "builtin"\nworkers = 100000\n')
    (tmp_path / "negative.toml").write_text('workload = "builtin"\nworkers = -1\n')
    (tmp_path / "fio.toml").write_text(f'workload = "fio"\nfile = "{tmp_path}/nodir/x.dat"\n')
    (tmp_path / "copies.toml").write_text('workload = "concurrency"\njob = "true"\ncopies = [1, 1]\n')
    (tmp_path / "manycopies.toml").write_text(
        'workload = "concurrency"\njob = "worklet:sha256:10"\ncopies = [1, 5000]\n'
    )
    (tmp_path / "disk.toml").write_text('[[worklet]]\nworklet = "random"\noptions = {size_mb = -4}\n')
    (tmp_path / "number.toml").write_text("[mqtt]\nbroker = 1883\n")
    (tmp_path / "emptystore.toml").write_text('[store]\nstore = ""\n')
    (tmp_path / "streem.toml").write_text('workload = "command"\nrun = "true"\nreport = "streem"\n')
    (tmp_path / "nothex.json").write_text('{"sim-01": "zz"}')
    (tmp_path / "twokeys.json").write_text('{"sim-01": "00ff", "sim-01": "11ee"}')
    (tmp_path / "table.csv").write_text("target,ops,power\n100%,1000,200\n")
    (tmp_path / "caps.csv").write_text("Target,Ops,Power\n100%,1000,200\n")
    (tmp_path / "semi.csv").write_text("target;ops;power\n100%;1000;200,5\n")
    (tmp_path / "twice.json").write_text(
        '{"dev": "host-a", "dev": "host-b", "board": "host", "channels": []}'
    )
    (tmp_path / "ca.toml").write_text(f'[mqtt]\ntls_ca = "{tmp_path}/notes.txt"\n')
    (tmp_path / "binary.toml").write_bytes(b'\xff\xfe name = "s"\n')
    (tmp_path / "flash.json").write_text(json.dumps({"dev": "fl-01", "flash_dir": f"{tmp_path}/nodir/fl"}))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        values = {
            "tmp": str(tmp_path),
            "store": make_store(tmp_path / "store.sqlite"),
            "down": f"http://127.0.0.1:{down}",
            "down_broker": f"127.0.0.1:{down}",
            "down_port": str(down),
            "taken": str(taken.getsockname()[1]),
        }
        argv = [a.format(**values) for a in row.argv]
        env = {k: v.format(**values) for k, v in row.env.items()}
        out = wattbench(argv, tmp_path, env)
    fragment = row.fragment.format(**values)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == row.code, out.stderr
    assert fragment in out.stderr, out.stderr
    assert len([line for line in out.stderr.splitlines() if fragment in line]) == 1
    if row.alone:
        assert out.stderr.splitlines() == [out.stderr.strip()], out.stderr
        assert out.stderr.startswith(f"wattbench {row.argv[0]}: "), out.stderr
    for rel in row.not_created:
        assert not (tmp_path / rel).exists(), f"{rel} was created by a command that only reads"


@pytest.mark.parametrize(
    ("argv", "option", "what"),
    [
        (["report", "latest", "--store", "{store}", "--json-out", "{store}"], "--json-out", "the store"),
        (["report", "latest", "--store", "{store}", "--html", "{tmp}/./store.sqlite"], "--html", "the store"),
        (["score", "{tmp}/pub.csv", "--json-out", "pub.csv"], "--json-out", "an input"),
        (["compare", "{tmp}/a.json", "{tmp}/b.json", "--html", "{tmp}/a.json"], "--html", "an input"),
    ],
    ids=["report-json-out-store", "report-html-store", "score-json-out-input", "compare-html-input"],
)
def test_an_output_onto_the_store_or_an_input_is_refused_and_writes_nothing(
    tmp_path: Path, argv: list[str], option: str, what: str
) -> None:
    """`report --json-out` naming the store replaced a live store with a JSON file (and --html cut it to
    nothing); score and compare overwrote their own inputs."""
    store = make_store(tmp_path / "store.sqlite")
    (tmp_path / "pub.csv").write_text("target,ops,W\n100,1000,200\n")
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text('{"v": 1}\n')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    out = wattbench([a.format(store=store, tmp=tmp_path) for a in argv], tmp_path)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert (
        f": {option} " in out.stderr and f"is {what} of this command: it would be overwritten" in out.stderr
    )
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_a_second_collector_with_the_same_id_is_refused_and_the_first_goes_on(tmp_path: Path) -> None:
    """Two collectors with one id share its status file and spool, and on MQTT the second takes the
    first's session, after which the first stored nothing until restarted. The second is refused in
    one line before it asks the broker."""
    import signal

    argv = [sys.executable, "-m", "wattbench.cli", "collect", "--broker", "127.0.0.1:9", "--id", "bench"]
    argv += ["--state-dir", str(tmp_path / "st"), "--store", str(tmp_path / "s.sqlite")]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "st" / "collector-bench.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        t0 = time.monotonic()
        second = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert time.monotonic() - t0 < 8  # the check, and starting Python on a loaded machine
        assert second.returncode == 2, second.stderr
        assert second.stderr.splitlines() == [
            f"wattbench collect: another collector (pid {first.pid}) runs with the id bench and the state "
            f"folder {tmp_path / 'st'}: stop it, or give this one another --id or --state-dir"
        ], second.stderr
        assert first.poll() is None
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)


@pytest.mark.parametrize("where", ["--json-out", "stdout", "closed stdout"])
def test_an_output_that_cannot_be_written_is_one_line_not_an_internal_error(
    tmp_path: Path, where: str
) -> None:
    """A full disk is the user's to act on, not a bug (exit 1, "internal error"); a closed stdout
    (`>&-`) is output nobody reads, not an AttributeError."""
    (tmp_path / "ok.csv").write_text("target,ops,power\n100,1000,200\n50,500,150\nidle,0,100\n")
    argv = [sys.executable, "-m", "wattbench.cli", "score", "ok.csv"]
    if where == "--json-out":
        argv += ["--json-out", "/dev/full"]
    with open("/dev/full", "w") as full:
        out = subprocess.run(
            argv,
            cwd=tmp_path,
            stdout=full if where == "stdout" else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            # fd 1 closed in the child, as the shell's >&- leaves it
            preexec_fn=(lambda: os.close(1)) if where == "closed stdout" else None,
        )
    if where == "closed stdout":
        assert (out.returncode, out.stderr) == (0, ""), out.stderr
        return
    assert out.returncode == 4, out.stderr
    named = "/dev/full: " if where == "--json-out" else ""  # a file is named; stdout is stdout
    assert out.stderr.splitlines() == [
        f"wattbench score: cannot write the output: {named}No space left on device"
    ]


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ("drop W", "levels[0] must contain ['W'] properties"),
        ("W 0", "levels[0].W must be bigger than 0"),
        ("W text", "levels[0].W must be number"),
        ("v 2", "v must be same as const definition: 1"),
        # edits the schema cannot see: an INVALID run called VALID, an overall its levels do not give
        (
            "valid with a failed check",
            "valid is true, but load_within_2pct failed: a run is VALID only when every check passes",
        ),
        ("overall 99.9", "overall 99.9 is not its levels' Σops / Σpower (8.57143)"),
    ],
)
def test_compare_refuses_a_hand_edited_result_in_the_contracts_words(
    tmp_path: Path, edit: str, why: str
) -> None:
    """compare read result files without the contract: a level without W was an internal error, W 0
    was scored (overall 42.3 instead of 19), a W in quotes and another format version passed."""
    vector = json.loads(
        (Path(__file__).parents[1] / "schema/vectors/valid/result_valid_run.json").read_text()
    )
    good = vector.get("payload", vector)
    bad = json.loads(json.dumps(good))
    level = bad["levels"][0]
    if edit == "drop W":
        del level["W"]
    elif edit == "W 0":
        level["W"] = 0
    elif edit == "W text":
        level["W"] = "250"
    elif edit == "valid with a failed check":
        bad["checks"][0]["ok"] = False
    elif edit == "overall 99.9":
        bad["overall"] = 99.9
    else:
        bad["v"] = 2
    (tmp_path / "a.json").write_text(json.dumps(good))
    (tmp_path / "b.json").write_text(json.dumps(bad))
    out = wattbench(["compare", "a.json", "b.json"], tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        f"wattbench compare: b.json: not a result wattbench can read: {why}"
    ], out.stderr


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        # a height of 0 rack units dropped the column without a word
        (["--rack-units", "a=0"], "argument --rack-units: 'a=0': NAME=NUMBER with a number > 0"),
        # the second price silently replaced the first
        (["--price", "a=5", "--price", "a=6"], "--price a is given twice (5 and 6)"),
        # the service life only counts the energy cost here: without a tariff it changed nothing
        (["--years", "7"], "--years needs --tariff: the service life counts only the energy cost"),
        (
            ["--tariff", "0.2", "--years", "1e300"],
            "--years must be a number of years above 0 and at most 100",
        ),
    ],
    ids=["rack-units-zero", "price-twice", "years-without-tariff", "years-absurd"],
)
def test_compare_refuses_price_inputs_it_would_drop_or_replace(
    tmp_path: Path, extra: list[str], line: str
) -> None:
    vector = json.loads(
        (Path(__file__).parents[1] / "schema/vectors/valid/result_valid_run.json").read_text()
    )
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(vector.get("payload", vector)))
    out = wattbench(["compare", "a.json", "b.json", *extra], tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines()[0].startswith(f"wattbench compare: {line}"), out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr


@pytest.mark.parametrize("columns", ["40", "60"])
def test_a_narrow_terminal_folds_numbers_and_never_cuts_them(tmp_path: Path, columns: str) -> None:
    """On a narrow terminal rich cut cells with an ellipsis: 617,957 read "617,9…". Every table folds."""
    (tmp_path / "ok.csv").write_text("target,ops,power\n100,617957,213.5\n50,308978,150.25\nidle,0,100\n")
    out = subprocess.run(
        [sys.executable, "-m", "wattbench.cli", "score", "ok.csv"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": columns},
    )
    assert out.returncode == 0, out.stderr
    assert "…" not in out.stdout, out.stdout


def test_score_names_the_figure_it_checks_against(tmp_path: Path) -> None:
    """A figure given with --expect was called "published", as if the table had printed it; and an ops
    cell written "-0" was shown as -0."""
    (tmp_path / "t.csv").write_text("target,ops,power\n100%,1000,200\n50%,-0,150\nidle,0,100\n")
    out = wattbench(["score", "t.csv", "--expect", "5"], tmp_path)
    assert out.returncode == 1, out.stderr
    assert "differs from the expected 5.00 (--expect)" in out.stdout, out.stdout
    assert "-0" not in out.stdout, out.stdout
    (tmp_path / "p.csv").write_text("# published overall 5\ntarget,ops,power\n100%,1000,200\nidle,0,100\n")
    out = wattbench(["score", "p.csv"], tmp_path)
    assert "differs from the published 5.00 (in p.csv)" in out.stdout, out.stdout
    out = wattbench(["score", "t.csv", "--json"], tmp_path)
    assert '"-0' not in out.stdout and "-0.0" not in out.stdout, out.stdout


def test_help_names_a_command_as_its_own_help_does(tmp_path: Path) -> None:
    """`wattbench help sweep` is `wattbench sweep --help`; `wattbench help` the top help."""
    out = wattbench(["help", "sweep"], tmp_path)
    own = wattbench(["sweep", "--help"], tmp_path)
    assert out.returncode == 0 and out.stdout == own.stdout, out.stderr
    out = wattbench(["help"], tmp_path)
    assert out.returncode == 0 and "usage: wattbench" in out.stdout and "help" in out.stdout, out.stderr


def _stored_runs(store: str) -> list[str]:
    from wattbench.store import open_store

    s = open_store(store, must_exist=True)
    try:
        return s.runs()
    finally:
        s.close()


def test_a_suite_refused_before_its_first_phase_prints_only_the_refusal(tmp_path: Path) -> None:
    """The suite's plan and its first worklet's name were printed before that worklet's channels were
    checked, so a typo in --channel ended in three lines on the terminal."""
    store = make_store(tmp_path / "store.sqlite")
    (tmp_path / "suite.toml").write_text('[[worklet]]\nworklet = "sha256"\nworkers = 1\n')
    out = wattbench(["suite", "suite.toml", "--store", store, "--channel", "bench/nope", *FAST], tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    assert out.stderr.splitlines() == [
        "wattbench suite: --channel bench/nope: bench has no channel nope (its channels: psu)"
    ]


def test_a_broker_given_to_the_demo_is_checked_as_the_sweep_checks_it(tmp_path: Path) -> None:
    """The demo's collector asked a given broker again for its whole connect timeout, as it would a
    broker still starting beside it, and the "broker:" progress line came first on stdout: 5.1 s and
    two lines where the sweep gives one at once. A given broker is up already: refused at the first
    answer, before anything is printed or started."""
    down = f"127.0.0.1:{services.free_port()}"
    t0 = time.monotonic()
    out = wattbench(["demo", "--broker", down, "--quiet"], tmp_path)
    took = time.monotonic() - t0
    assert out.returncode == 3, out.stderr
    assert out.stdout == ""
    assert out.stderr.splitlines() == [f"wattbench demo: MQTT broker {down} unreachable: Connection refused"]
    assert took < CONNECT_TIMEOUT_S, took  # no retrying: the old path could not end before its timeout


@pytest.mark.skipif(os.geteuid() != 0, reason="root is let into /proc, and refused a new file there")
def test_a_folder_that_refuses_a_new_file_is_not_called_missing(tmp_path: Path) -> None:
    """/proc is there and refuses a new file with ENOENT, whose own words said it was missing."""
    (tmp_path / "table.csv").write_text("target,ops,power\n100%,1000,200\n")
    (tmp_path / "caps.csv").write_text("Target,Ops,Power\n100%,1000,200\n")
    (tmp_path / "semi.csv").write_text("target;ops;power\n100%;1000;200,5\n")
    out = wattbench(["score", "table.csv", "--html", "/proc/x.html"], tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        "wattbench score: argument --html: folder '/proc' cannot be written (it takes no new files) "
        "(see wattbench score --help)"
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may open /proc/version to write")
def test_an_output_file_that_fails_while_written_is_named_with_exit_4(tmp_path: Path) -> None:
    """A file that opens but fails as it is written (here EIO: /proc/version passes every check made
    before the run) ended the command with "internal error: OSError: [Errno 5]", exit 1, naming no
    file: exit 1 reads as "measured, and INVALID"."""
    (tmp_path / "table.csv").write_text("target,ops,power\n100%,1000,200\n")
    (tmp_path / "caps.csv").write_text("Target,Ops,Power\n100%,1000,200\n")
    (tmp_path / "semi.csv").write_text("target;ops;power\n100%;1000;200,5\n")
    out = wattbench(["score", "table.csv", "--json-out", "/proc/version"], tmp_path)
    assert out.returncode == 4, out.stderr
    assert out.stderr.splitlines()[-1].startswith("wattbench score: cannot write the output: /proc/version: ")
    assert "internal error" not in out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="bonnie++ refuses only root")
def test_bonnie_as_root_without_a_user_is_refused_before_the_run(tmp_path: Path) -> None:
    """bonnie++ refuses to run as root without -u: the sweep found it after its start, exit 4."""
    out = wattbench(["sweep", "--ops-only", "--workload", "bonnie", *FAST], tmp_path)
    assert (out.returncode, out.stderr.splitlines()) == (
        2,
        [
            "wattbench sweep: bonnie workload: user: not set, and bonnie++ refuses to run as root without "
            'one (user = "root")'
        ],
    ), out.stderr
    assert not (tmp_path / "wattbench-bonnie").exists()


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_terminal_that_is_not_utf8_gets_the_whole_table(tmp_path: Path, encoding: str) -> None:
    """score, report and compare printed half a table, then "internal error: UnicodeEncodeError", exit 1,
    on a stream that cannot encode ∑ or ★; the table borders had already fallen back to ASCII."""
    (tmp_path / "a.csv").write_text("target,ops,power\n100%,1000,200\n50%,500,150\nActive Idle,0,100\n")
    (tmp_path / "b.csv").write_text("target,ops,power\n100%,1200,220\n50%,600,160\nActive Idle,0,100\n")
    env = {"PYTHONIOENCODING": encoding}
    score = wattbench(["score", "a.csv"], tmp_path, env)
    assert score.returncode == 0 and "internal error" not in score.stderr, score.stderr
    assert "sum ssj_ops / sum power = 3.33" in score.stdout, score.stdout
    compare = wattbench(["compare", "a.csv", "b.csv"], tmp_path, env)
    assert compare.returncode == 0 and "internal error" not in compare.stderr, compare.stderr


def test_a_status_file_of_another_shape_is_skipped_with_a_word(tmp_path: Path) -> None:
    """A collector status file holding JSON of another shape ([1, 2]) made `status` fail with
    "internal error: AttributeError", exit 1."""
    state = tmp_path / "st"
    state.mkdir()
    (state / "collector-odd.json").write_text("[1, 2]\n")
    store = make_store(tmp_path / "store.sqlite")
    out = wattbench(["status", "--state-dir", str(state), "--store", store], tmp_path)
    assert out.returncode == 1 and "no device accounting found" in out.stdout, out.stderr  # as with none
    assert "internal error" not in out.stderr
    assert f"skipped {state / 'collector-odd.json'}: not a collector status file" in out.stderr


def test_a_message_naming_a_long_path_stays_one_line_in_a_pipe(tmp_path: Path) -> None:
    """rich wraps text at 80 columns when it writes to a pipe: `status` broke its "no device accounting
    found (state dir ..., store ...)" line inside the path, so a script's grep for the path missed it."""
    state = tmp_path / ("a-state-folder-with-a-name-long-enough-to-pass-eighty-columns-" * 2)
    state.mkdir()
    store = make_store(tmp_path / "store.sqlite")
    out = wattbench(["status", "--state-dir", str(state), "--store", store], tmp_path)
    line = next(ln for ln in out.stdout.splitlines() if "no device accounting found" in ln)
    assert f"state dir {state}, store {store})" in line, out.stdout


def test_a_sweep_on_a_store_nobody_writes_is_refused_before_its_first_phase(tmp_path: Path) -> None:
    """A store the collector does not write (another file, an old one) held the channel's metadata, so
    the whole plan ran (72 minutes at the default timing) and then found no power: the store must hold
    a sample of every power channel from the last 30 s before the first phase."""
    import sqlite3

    from wattbench.store import open_store

    store = make_store(tmp_path / "old.sqlite")
    with sqlite3.connect(store) as db:  # the same store an hour later: nobody has written since
        db.execute("UPDATE wb_sample SET time = time - 3600000000000")
    argv = ["sweep", "--store", store, "--channel", "bench/psu", "--cmd", "true", *FAST]
    t0 = time.monotonic()
    out = wattbench(argv, tmp_path)
    assert time.monotonic() - t0 < 20  # it waits up to 10 s for a collector that is just starting
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        f"wattbench sweep: the store {store} holds no sample of bench/psu from the last 30 s: is "
        "`wattbench collect` writing into it? (nothing was measured or stored)"
    ], out.stderr
    assert _stored_runs(store) == []
    s = open_store(store, must_exist=True)
    s.close()


def test_a_sqlite_file_that_is_no_wattbench_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    """The sweep opened someone else's SQLite file as its store and added the store's tables to it."""
    import sqlite3

    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (x)")
    for argv in (
        ["sweep", "--store", str(other), "--cmd", "true", *FAST],
        ["report", "latest", "--store", str(other)],
    ):
        out = wattbench(argv, tmp_path)
        assert out.returncode == 3, out.stderr
        assert out.stderr.splitlines() == [
            f"wattbench {argv[0]}: store {other} is a SQLite file but no wattbench store (it has no "
            "wb_sample table; nothing was changed)"
        ], out.stderr
    with sqlite3.connect(other) as db:
        assert [r[0] for r in db.execute("SELECT name FROM sqlite_master")] == ["notes"]


def test_a_sweep_into_an_influx_database_that_does_not_exist_creates_none(
    tmp_path: Path, influx: services.InfluxDB, mosquitto: Any
) -> None:
    """A typo in --db, with the channel's metadata on the broker: the whole plan ran, then the sweep
    created the misspelt database and stored the run in it."""
    import paho.mqtt.client as mqtt

    meta = BENCH_META
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="meta-pub")
    pub.connect(mosquitto.host, mosquitto.port)
    pub.loop_start()
    for topic, doc in (("meta", meta), ("status", {"v": 1, "dev": "bench", "state": "online"})):
        pub.publish(f"wattbench/v1/dev/bench/{topic}", json.dumps(doc), qos=1, retain=True).wait_for_publish(
            10
        )
    pub.loop_stop()
    pub.disconnect()
    broker = f"{mosquitto.host}:{mosquitto.port}"
    argv = ["sweep", "--influx", influx.url, "--db", "wattbenhc", "--broker", broker]
    argv += ["--channel", "bench/psu", "--cmd", "true", *FAST]
    t0 = time.monotonic()
    out = wattbench(argv, tmp_path)
    assert time.monotonic() - t0 < 10  # the whole plan ran before: 26 s with this short timing
    assert out.returncode == 3, out.stderr
    assert len(out.stderr.splitlines()) == 1 and "database not found: wattbenhc" in out.stderr, out.stderr
    shown = influx._post_query("SHOW DATABASES")
    names = {v[0] for s in shown["results"][0].get("series", []) for v in s.get("values", [])}
    assert "wattbenhc" not in names


def test_a_run_id_already_in_the_store_is_refused(tmp_path: Path) -> None:
    """Repeating a documented command with its --run stored a second run under the same id: the two
    runs' events merged and the report scored nonsense (windows of -1058 s)."""
    from wattbench.store import open_store

    store = make_store(tmp_path / "store.sqlite")
    s = open_store(store, must_exist=True)
    start = {"v": 1, "run": "first", "n": 0, "t": int(time.time() * 1000) - 600_000, "event": "run_start"}
    s.write_phase(dict(start, phase="run"))
    s.flush()
    s.close()
    (tmp_path / "suite.toml").write_text('[[worklet]]\nworklet = "sha256"\nworkers = 1\n')
    for argv, said in (
        (["sweep", "--store", store, "--run", "first", "--cmd", "true", *FAST], "--run first"),
        (["suite", "suite.toml", "--store", store, "--run", "first", *FAST], "--run first"),
    ):
        out = wattbench(argv, tmp_path)
        assert out.returncode == 2, out.stderr
        assert out.stderr.splitlines() == [
            f"wattbench {argv[0]}: {said}: run first is already in the store; give another id, or leave "
            "--run out for one of the time"
        ], out.stderr
    s = open_store(store, must_exist=True)
    assert len(s.phases("first")) == 1
    s.close()


def test_a_misspelt_run_id_gets_the_nearest_stored_one(tmp_path: Path) -> None:
    """`report frist` listed the ten newest runs, and `first`, older, was not among them."""
    from wattbench.store import open_store

    store = make_store(tmp_path / "store.sqlite")
    s = open_store(store, must_exist=True)
    t = int(time.time() * 1000) - 3_600_000
    for i, run in enumerate(["first", *(f"r{k:02d}" for k in range(12))]):
        s.write_phase({"v": 1, "run": run, "n": 0, "t": t + i * 1000, "event": "run_start", "phase": "run"})
    s.flush()
    s.close()
    out = wattbench(["report", "frist", "--store", store], tmp_path)
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith(
        "wattbench report: no run 'frist' in the store, did you mean first? (recent runs: r11,"
    )


def test_a_port_of_the_other_service_is_refused_within_5_s(
    tmp_path: Path, influx: services.InfluxDB, mosquitto: Any
) -> None:
    """The broker's port given as InfluxDB's took 15.9 s and named a urllib3 class (ReadTimeoutError);
    InfluxDB's HTTP port given as the broker's took 10.8 s; TLS to a plain broker took 6 s and said
    "_ssl.c:989: The handshake operation timed out"."""
    store = make_store(tmp_path / "store.sqlite")
    broker = f"{mosquitto.host}:{mosquitto.port}"
    http = influx.url.removeprefix("http://")
    for argv, fragment in (
        (
            ["report", "latest", "--influx", f"http://{broker}"],
            f"InfluxDB at http://{broker} does not answer",
        ),
        (["sweep", "--store", store, "--broker", http, "--cmd", "true", *FAST], f"MQTT broker {http}"),
        (
            ["sweep", "--store", store, "--broker", f"mqtts://{broker}", "--cmd", "true", *FAST],
            f"MQTT broker {broker}",
        ),
    ):
        t0 = time.monotonic()
        out = wattbench(argv, tmp_path)
        took = time.monotonic() - t0
        assert out.returncode == 3, out.stderr
        assert len(out.stderr.splitlines()) == 1 and fragment in out.stderr, out.stderr
        assert "Error" not in out.stderr and "_ssl.c" not in out.stderr, out.stderr
        # Its bound is 4 s; the margin is for starting Python on a loaded machine (before: 10.8 and 15.9 s).
        assert took < 8, (argv, took, out.stderr)


def test_report_refuses_a_channel_the_run_did_not_have(tmp_path: Path) -> None:
    """A typo in --channel when re-scoring a stored run was scored as a channel that fell silent, and
    the report exited 0; it is checked against what the store held during the run, as a sweep does."""
    store = make_store(tmp_path / "store.sqlite")
    sweep = ["sweep", "--store", store, "--run", "r1", "--channel", "bench/psu", "--wait-data", "0", *FAST]
    assert wattbench(sweep, tmp_path).returncode in (0, 1)
    for extra in ([], ["--rescore"]):
        out = wattbench(["report", "r1", "--store", store, "--channel", "bench/pus", *extra], tmp_path)
        assert out.returncode == 2, out.stderr
        assert out.stdout == ""
        assert out.stderr.splitlines() == [
            "wattbench report: --channel bench/pus: bench has no channel pus, did you mean bench/psu? "
            "(its channels: psu)"
        ]
    out = wattbench(["report", "r1", "--store", store, "--inlet", "bnch/t"], tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        "wattbench report: --inlet bnch/t: no device bnch in the store during run r1, did you mean bench? "
        "(devices seen: bench)"
    ]
    # the run's power channel named as the inlet probe was scored INVALID, exit 0; with --channel
    # given too it was refused
    for extra in ([], ["--rescore"]):
        out = wattbench(["report", "r1", "--store", store, "--inlet", "bench/psu", *extra], tmp_path)
        assert (out.returncode, out.stdout) == (2, ""), out.stderr
        assert out.stderr.splitlines() == [
            "wattbench report: --inlet: bench/psu is the run's power channel (as it was scored); "
            "a channel is measured once"
        ]
    # an offset for a misspelt device was taken, and recorded, while the device went without one
    for extra in ([], ["--rescore"]):
        out = wattbench(["report", "r1", "--store", store, "--clock-offset", "bnch=5", *extra], tmp_path)
        assert out.returncode == 2, out.stderr
        assert out.stdout == ""
        assert out.stderr.splitlines() == [
            "wattbench report: --clock-offset bnch=5: no channel of bnch is measured (the run's devices: bench)"
        ]


def test_compare_reads_latest_as_report_does(tmp_path: Path) -> None:
    """`compare latest` said "latest: no such file, and no result of that run in the store", while the
    docs and sweep's own refusal of `--run latest` say report and compare read it as the newest run."""
    empty = make_store(tmp_path / "empty.sqlite")
    out = wattbench(["compare", "latest", "--store", empty], tmp_path)
    assert (out.returncode, out.stderr.splitlines()) == (2, ["wattbench compare: the store holds no runs"])
    store = make_store(tmp_path / "store.sqlite")
    sweep = ["sweep", "--store", store, "--run", "r1", "--channel", "bench/psu", "--wait-data", "0", *FAST]
    assert wattbench(sweep, tmp_path).returncode in (0, 1)
    # the run is r1 (its few samples give its levels no power, which compare says of r1 by name)
    out = wattbench(["compare", "latest", "--store", store], tmp_path)
    assert out.stderr.splitlines() == [
        "wattbench compare: stored run r1: the result has no target load or job level with power"
    ]


def test_a_missing_program_stores_nothing_and_prints_one_line(tmp_path: Path) -> None:
    """The issue's own case: a typo in --cmd. Nothing stored, no report, no files, one line, at once."""
    store = make_store(tmp_path / "store.sqlite")
    result, html = tmp_path / "result.json", tmp_path / "run.html"
    argv = ["sweep", "--store", store, "--json-out", str(result), "--html", str(html), *FAST]
    out = wattbench([*argv, "--workload", "command", "--cmd", "mybenchh --threads 4"], tmp_path, timeout=30)
    assert out.returncode == 2, out.stderr
    assert out.stderr == "wattbench sweep: --cmd: cannot start 'mybenchh': no such program on PATH\n"
    assert out.stdout == ""
    assert not result.exists() and not html.exists()
    assert _stored_runs(store) == []
    latest = wattbench(["report", "latest", "--store", store], tmp_path)
    assert latest.returncode != 0 and "no run" in latest.stderr, latest.stderr


def test_a_command_failing_before_the_first_window_stores_nothing(tmp_path: Path) -> None:
    """A command that fails in cal1's ramp-up: no window was measured. The run stops there (no second
    calibration), names the level in its one line, and leaves no run, table or file behind."""
    store = make_store(tmp_path / "store.sqlite")
    result = tmp_path / "result.json"
    argv = ["sweep", "--store", store, "--run", "failing", "--json-out", str(result), *FAST]
    argv += ["--cmd", PY + " -c 'import sys; sys.exit(3)'"]
    out = wattbench(argv, tmp_path)
    assert out.returncode == 4, out.stderr
    lines = [line for line in out.stderr.splitlines() if "channel bench/psu" not in line]
    assert lines == [
        "wattbench sweep: workload failed during cal1: the command exited with status 3 "
        "(before the first measurement window: no run stored)"
    ], out.stderr
    assert out.stdout == ""
    assert not result.exists()
    assert _stored_runs(store) == []


def test_failed_command_stops_the_run_at_its_level(tmp_path: Path) -> None:
    """A command that fails in cal2, after a window was measured: the run ends there, stored and
    scored as a partial run naming the level."""
    store = make_store(tmp_path / "store.sqlite")
    result = tmp_path / "result.json"
    argv = ["sweep", "--store", store, "--run", "failing", "--json-out", str(result), *FAST]
    script = (
        # cal1 does work (a count that grows: a calibration interval without ops stops a run by itself)
        "import sys, time; sys.exit(3) if sys.argv[1] == 'cal2' else "
        "[(print(i, flush=True), time.sleep(0.05)) for i in range(1, 600)]"
    )
    argv += ["--cmd", f'{PY} -c "{script}" {{level}}']
    out = wattbench(argv, tmp_path)
    assert out.returncode == 4, out.stderr
    doc = json.loads(result.read_text())
    assert doc["valid"] is False
    complete = next(c for c in doc["checks"] if c["name"] == "complete")
    assert complete["reason"] == "workload failed during cal2: the command exited with status 3"
    from wattbench.store import open_store

    s = open_store(store, must_exist=True)
    try:
        phases = {e["phase"] for e in s.phases("failing")}
    finally:
        s.close()
    assert phases == {"run", "cal1", "cal2"}


@pytest.mark.services
@pytest.mark.timeout(120)
def test_a_run_without_a_window_publishes_nothing(tmp_path: Path, mosquitto: services.Mosquitto) -> None:
    """With a broker: no phase event and no retained result of a run that measured no window, so a
    collector has nothing to store either."""
    import threading

    import paho.mqtt.client as mqtt

    seen: list[str] = []
    subscribed = threading.Event()
    tap = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="run-tap")
    tap.on_message = lambda c, u, m: seen.append(m.topic)
    tap.on_subscribe = lambda *a: subscribed.set()
    tap.connect(mosquitto.host, mosquitto.port)
    tap.subscribe("wattbench/v1/run/#", qos=1)
    tap.loop_start()
    try:
        assert subscribed.wait(10)
        store = make_store(tmp_path / "store.sqlite")
        broker = ["--broker", f"{mosquitto.host}:{mosquitto.port}", "--channel", "bench/psu"]
        argv = ["sweep", "--store", store, *broker, "--run", "nothing", *FAST]
        out = wattbench([*argv, "--cmd", PY + " -c 'import sys; sys.exit(3)'"], tmp_path)
        assert out.returncode == 4, out.stderr
        time.sleep(1.0)  # anything sent would have arrived by now
    finally:
        tap.loop_stop()
        tap.disconnect()
    assert seen == []
    assert _stored_runs(store) == []


def test_ops_only_run_says_power_was_not_measured(tmp_path: Path) -> None:
    out = wattbench(["sweep", "--ops-only", *FAST, "--workers", "1"], tmp_path)
    assert out.returncode == 1, out.stderr
    assert "∑ops / ∑power: not measured" in out.stdout
    assert "∑ops / ∑power = 0" not in out.stdout


def test_report_reads_where_collect_writes(tmp_path: Path) -> None:
    """With no --store, `report` opens the file `collect` writes by default, and creates nothing."""
    from wattbench.config import load_config

    env = {"WATTBENCH_STATE_DIR": str(tmp_path / "state")}
    collect_default = load_config(env=env).resolved().store_spec()
    from wattbench.store import open_store

    (tmp_path / "state").mkdir()  # as the collector makes its state folder at start
    store = open_store(collect_default)
    start = {"v": 1, "run": "r1", "n": 0, "t": 1767225600000, "event": "run_start", "phase": "run"}
    store.write_phase(start)
    store.write_phase(dict(start, n=1, t=1767225601000, event="run_end"))
    store.flush()
    store.close()
    out = wattbench(["report", "latest", "--json"], tmp_path, env)
    assert "Traceback" not in out.stderr, out.stderr
    assert json.loads(out.stdout)["result"]["run"] == "r1"
    assert not (tmp_path / "wattbench.sqlite").exists()
    out = wattbench(["status", "--verify", "--state-dir", str(tmp_path / "state")], tmp_path, env)
    assert "Traceback" not in out.stderr and out.returncode in (0, 1), out.stderr


def test_report_on_influx_creates_no_database(tmp_path: Path, influx: services.InfluxDB) -> None:
    out = wattbench(["report", "latest", "--influx", influx.url, "--db", "never_written"], tmp_path)
    assert "Traceback" not in out.stderr
    assert out.returncode == 3 and "database not found: never_written" in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    shown = influx._post_query("SHOW DATABASES")
    names = {v[0] for s in shown["results"][0].get("series", []) for v in s.get("values", [])}
    assert "never_written" not in names


SPECPOWER = Path(__file__).resolve().parent / "data" / "specpower"
CLOSED_PIPE = [
    ["status", "--json", "--store", "{store}", "--state-dir", "{tmp}"],
    ["status", "--store", "{store}", "--state-dir", "{tmp}"],
    ["report", "latest", "--store", "{store}"],
    ["report", "latest", "--store", "{store}", "--json"],
    ["score", str(SPECPOWER / "ibm-x3650-m2-2009.csv")],
    ["score", str(SPECPOWER / "ibm-x3650-m2-2009.csv"), "--json"],
    ["compare", str(SPECPOWER / "dell-r7425-2018.json"), str(SPECPOWER / "ibm-x3250-m3-2010.json")],
    ["compare", str(SPECPOWER / "dell-r7425-2018.json"), str(SPECPOWER / "ibm-x3250-m3-2010.json"), "--json"],
]


@pytest.mark.parametrize(
    "argv", CLOSED_PIPE, ids=[" ".join(a for a in c if not a.startswith(("{", "/"))) for c in CLOSED_PIPE]
)
def test_output_into_a_closed_pipe(argv: list[str], tmp_path: Path) -> None:
    """`wattbench report latest | head -1`: the reader leaving early is not an error worth a traceback,
    and every command says so with 141, whether it prints a table or JSON."""
    from wattbench.store import open_store

    store = make_store(tmp_path / "store.sqlite")
    s = open_store(store)
    start = {"v": 1, "run": "r1", "n": 0, "t": 1767225600000, "event": "run_start", "phase": "run"}
    s.write_phase(start)
    s.write_phase(dict(start, n=1, t=1767225601000, event="run_end"))
    s.flush()
    s.close()
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "xdg"))
    proc = subprocess.Popen(
        [WATTBENCH, *(a.format(store=store, tmp=tmp_path) for a in argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the command has written anything
    err = proc.stderr.read().decode()
    proc.wait(60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 141, err


def test_every_command_prints_through_the_console_that_knows_a_closed_pipe() -> None:
    """rich's own Console ends on a closed pipe with a silent exit 1: a command that made one of its own
    would not say 141."""
    cli = Path(__file__).resolve().parents[1] / "collector" / "wattbench" / "cli"
    own = [p.name for p in cli.glob("*.py") if p.name != "options.py" and "rich.console" in p.read_text()]
    assert own == [], own


@pytest.mark.parametrize(
    "argv",
    [["-v", "-v", "report"], ["report", "-v", "-v"], ["-v", "report", "-v"], ["report", "-vv"]],
)
def test_verbose_before_or_after_the_subcommand(argv: list[str], tmp_path: Path) -> None:
    """-vv anywhere shows the traceback of a failure that is otherwise one line."""
    argv = [*argv, "latest", "--store", str(tmp_path / "missing.sqlite")]
    out = wattbench(argv, tmp_path)
    assert out.returncode == 3
    assert "Traceback" in out.stderr and "StoreMissing" in out.stderr
    assert not (tmp_path / "missing.sqlite").exists()


@pytest.mark.timeout(240)
def test_store_lost_during_the_sweep_keeps_what_was_measured(
    tmp_path: Path, influx: services.InfluxDB
) -> None:
    """InfluxDB stops mid-run: one line and exit 3, and the result (ops, events, the reason) is still
    written, marked invalid, instead of a traceback that loses the run."""
    import time

    result = tmp_path / "result.json"
    make_store(influx.url, db="lost")  # the appliance the sweep binds to, as the collector stored it
    argv = ["sweep", "--influx", influx.url, "--db", "lost", "--run", "lost-store", *FAST]
    argv += ["--workers", "1", "--wait-data", "1", "--json-out", str(result)]
    full_env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "xdg"))
    proc = subprocess.Popen(
        [WATTBENCH, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env
    )
    try:
        time.sleep(3.0)  # the store answered at the start; the run is under way
        assert proc.poll() is None, proc.communicate()
        influx.stop()
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
        if not influx.running:  # started again for the module's other tests; never a second one
            influx.start()
    assert "Traceback" not in stderr, stderr
    assert proc.returncode == 3, stderr
    assert "the store could not be read after the run" in stderr
    doc = json.loads(result.read_text())
    assert doc["valid"] is False
    complete = next(c for c in doc["checks"] if c["name"] == "complete")
    assert "the store could not be read after the run" in complete["reason"]
    assert "∑ops / ∑power: not measured" in stdout


@pytest.mark.parametrize("verbose", [[], ["-vv"]])
def test_a_bug_is_one_line_unless_asked_for_the_traceback(
    verbose: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import wattbench.cli.broker
    from wattbench.cli import main

    def broken(args: object) -> int:
        raise RuntimeError("something unforeseen")

    monkeypatch.setattr(wattbench.cli.broker, "run", broken)
    assert main(["broker", *verbose]) == 1
    err = capsys.readouterr().err
    assert "something unforeseen" in err
    if verbose:
        assert "Traceback" in err
    else:
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_demo_that_stops_early_leaves_no_temporary_folders(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    down = f"http://127.0.0.1:{services.free_port()}"
    out = wattbench(["demo", "--influx", down, "--quiet"], tmp_path, {"TMPDIR": str(temp)})
    assert out.returncode == 3, out.stderr
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "latest", "--store", "{tmp}/notes.txt"],
        ["status", "--store", "{tmp}/notes.txt", "--state-dir", "{tmp}"],
        ["status", "--json", "--store", "{tmp}/notes.txt", "--state-dir", "{tmp}"],
    ],
)
def test_a_store_that_is_not_one_is_named_once(argv: list[str], tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a database\n")
    out = wattbench([a.format(tmp=tmp_path) for a in argv], tmp_path, {})
    assert out.returncode == 3, out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].count("notes.txt") == 1, out.stderr
    assert "store: store" not in lines[0] and "not a database" in lines[0], lines[0]


def test_a_command_that_ends_on_its_own_warns_in_its_own_words(tmp_path: Path) -> None:
    """Warnings of sweep, suite, demo, report... were timestamped log lines ("2026-... WARNING
    wattbench.sweep.driver: ..."), unlike every other line those commands print; with -v they are again,
    for the record. The daemons (collect, broker, appliance, ptd) keep timestamps: they run for days."""
    out = wattbench(["sweep", "--ops-only", *FAST], tmp_path)
    assert "wattbench sweep: --ops-only: the run measures throughput only" in out.stderr, out.stderr
    assert "WARNING" not in out.stderr, out.stderr
    out = wattbench(["sweep", "-v", "--ops-only", *FAST], tmp_path)
    assert "WARNING wattbench.sweep: --ops-only" in out.stderr, out.stderr


def test_collect_says_at_once_that_its_broker_does_not_answer(tmp_path: Path) -> None:
    """With nothing at the broker's address, collect said nothing for its whole connect timeout (30 s by
    default), then one line. It says at once that it is waiting, and why, then gives up as before (a
    timeout of 5 s or less ends in its one line soon enough)."""
    (tmp_path / "slow.toml").write_text("connect_timeout_s = 6\n")
    down = services.free_port()
    argv = ["collect", "--config", str(tmp_path / "slow.toml"), "--broker", f"127.0.0.1:{down}"]
    out = wattbench([*argv, "--state-dir", str(tmp_path / "st")], tmp_path)
    lines = out.stderr.splitlines()
    assert out.returncode == 3, out.stderr
    assert len(lines) == 2, out.stderr
    assert lines[0].endswith(
        f"the MQTT broker at 127.0.0.1:{down} does not answer (Connection refused): "
        f"trying again for up to 6 s (connect_timeout_s in {tmp_path / 'slow.toml'})"
    ), out.stderr
    assert lines[1].startswith("wattbench collect: cannot reach the MQTT broker"), out.stderr


LONG = "a" * 300  # one name in a path beyond Linux's 255 bytes


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["report", "latest", "--store", f"{LONG}.sqlite"], 2),
        (["report", "latest", "--store", "{store}", "--html", f"{LONG}.html"], 2),
        (["status", "--state-dir", LONG], 2),
        (["suite", f"{LONG}.toml", "--ops-only"], 2),
        (["sweep", "--ops-only", "--workload-config", f"{LONG}.toml"], 2),
        (["collect", "--store", f"{LONG}.sqlite", "--broker", "127.0.0.1:1"], 2),
        (["appliance", "--sim", "--spool-dir", LONG, "--count", "1"], 2),
        (["compare", "{tmp}/table.csv", f"{LONG}.json"], 2),
        (["sweep", "--ops-only", "--run", "a" * 100_000, *FAST], 2),
        (["report", "b" * 100_000, "--store", "{store}"], 2),
        (["sweep", "--ops-only", "--channel", "c" * 5_000, *FAST], 2),
    ],
    ids=[
        "store",
        "html",
        "state-dir",
        "suite-file",
        "workload-config",
        "collect-store",
        "spool-dir",
        "compare-input",
        "run-id",
        "report-run-id",
        "channel",
    ],
)
def test_an_overlong_value_is_one_short_line(argv: list[str], code: int, tmp_path: Path) -> None:
    """A name in a path beyond 255 bytes was a 56-line traceback (the path checks' stat, while the
    command line was read) or an internal error, exit 1; a 100,000-character run id came back whole,
    a line of 100 kB. Each is one line with its exit code, and a long value is shown cut."""
    (tmp_path / "table.csv").write_text("target,ops,power\n100%,1000,200\n")
    values = {"tmp": str(tmp_path), "store": make_store(tmp_path / "store.sqlite")}
    out = wattbench([a.format(**values) for a in argv], tmp_path, timeout=60)
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert out.returncode == code, out.stderr[:2000]
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and len(lines[0]) < 400, out.stderr[:2000]
    assert lines[0].startswith(f"wattbench {argv[0]}: "), lines[0]
