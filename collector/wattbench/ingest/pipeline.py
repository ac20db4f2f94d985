"""From MQTT messages to store records and reject notices. Pure: no sockets, the caller gives the
receive time, and what comes out is data (records to commit, notices to publish)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import wattbench_schema as contract

from . import records as rec
from .accounting import Accounts
from .validate import Accepted, Rejected, Validator, Verdict

DEVICE_ID = re.compile(contract.load_schema("common")["$defs"]["device_id"]["pattern"])


@dataclass
class Batch:
    """What one commit carries: records for the store, and how many sample rows they hold."""

    records: list[rec.Record] = field(default_factory=list)
    samples: int = 0
    messages: int = 0

    def __bool__(self) -> bool:
        return bool(self.records)


def _unchecked(topic: str, raw: bytes, exc: Exception) -> Rejected:
    return Rejected("schema", f"could not be checked ({exc.__class__.__name__}: {exc})", topic, len(raw))


def _same_meta(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Equal apart from the publish time t."""
    if old is None:
        return False
    return {k: v for k, v in old.items() if k != "t"} == {k: v for k, v in new.items() if k != "t"}


class Pipeline:
    """Validates, accounts and turns messages into records. One instance per collector process."""

    def __init__(
        self,
        collector_id: str,
        validator: Validator | None = None,
        track_gaps: bool = True,
        keep_latest: bool = False,
    ) -> None:
        """keep_latest: keep each channel's newest sample for the live view (/metrics); off, the hot
        path does not pay for it."""
        self.collector_id = collector_id
        self.validator = validator or Validator()
        self.accounts = Accounts(track_gaps)
        self.meta: dict[str, dict[str, Any]] = {}
        self.batch = Batch()
        self.notices: list[dict[str, Any]] = []
        self.messages = 0
        self.accepted = 0
        self.rejected = 0
        self.energy_steps = 0
        self.reject_reasons: Counter[str] = Counter()
        self.last_rejects: list[dict[str, Any]] = []
        self._last_reject_ms = 0
        self._last_status_ms: dict[str, int] = {}
        # The newest accepted sample of each channel, (dev, ch) -> row, and the newest run result:
        # what the live view (/metrics) shows. Only the last row of a batch per channel is kept.
        self.keep_latest = keep_latest
        self.latest: dict[tuple[str, str], dict[str, Any]] = {}
        self.last_result: dict[str, Any] | None = None

    # ------------------------------------------------------------------ messages

    def handle(
        self, topic: str, raw: bytes, recv_ms: int, checked: Verdict | None = None
    ) -> Accepted | Rejected | None:
        """Process one message; its records join the current batch. checked: the verdict of its
        stateless check when that ran elsewhere (ingest.parallel), else None and it runs here. For a
        store with an encoder (the validator's), a sample batch the one pass vouches for comes with
        the store's bytes and its digest, as from a checking process.

        Returns the outcome, or None for a sample batch accepted whole from its digest (never read)."""
        if checked is None:
            one = self.validator.encoded(topic, raw, recv_ms)
            if one is None:
                try:
                    outcome = self.validator.check(topic, raw, recv_ms)
                except Exception as exc:  # a validator bug must not take the collector down
                    outcome = _unchecked(topic, raw, exc)
                return self._process(outcome, recv_ms)
            checked = (None, *one)
        verdict, encoded, plain = checked
        if verdict is not None:
            return self._process(verdict, recv_ms)
        if plain is not None and encoded is not None and not self.keep_latest:
            found = self.validator.match(topic)
            dev = found[1].get("dev") if found is not None and found[0] == "samples" else None
            if dev is not None and self.accounts.get(dev).admit_plain(plain, recv_ms):
                # Every row kept: the store gets its bytes, and the rows only if it asks (the spool).
                self.messages += 1
                self.batch.messages += 1
                self.accepted += 1
                self.batch.records.append(rec.samples(dev, rec.PayloadRows(raw, plain.count), encoded))
                self.batch.samples += plain.count
                return None
        try:
            outcome = self.validator.accept_checked(topic, raw, recv_ms)
        except Exception as exc:
            outcome = _unchecked(topic, raw, exc)
        return self._process(outcome, recv_ms, encoded)

    def _process(
        self, outcome: Accepted | Rejected, recv_ms: int, encoded: bytes | None = None
    ) -> Accepted | Rejected:
        """Account for a checked message; its records join the current batch. encoded: a sample
        batch's rows as the store's encoder made them, used when every row is kept."""
        self.messages += 1
        self.batch.messages += 1
        if isinstance(outcome, Rejected):
            self._reject(outcome, recv_ms)
            return outcome
        self.accepted += 1
        kind, doc, topic = outcome.kind, outcome.payload, outcome.topic
        if kind == "samples":
            acct = self.accounts.get(doc["dev"])
            rows, steps = acct.admit(doc, recv_ms)
            if rows:
                # Kept rows are the batch's rows in order, so all of them kept means the bytes fit.
                whole = encoded if len(rows) == len(doc["samples"]) else None
                self.batch.records.append(rec.samples(doc["dev"], rows, whole))
                self.batch.samples += len(rows)
            if rows and self.keep_latest:
                dev = doc["dev"]
                latest = self.latest
                # A batch's rows are in sequence order: the last row of each channel is its newest.
                for ch, row in {row["c"]: row for row in rows}.items():
                    held = latest.get((dev, ch))
                    if held is None or row["t"] >= held["t"]:
                        latest[(dev, ch)] = row
            for step in steps:
                self.energy_steps += 1
                self._notice(
                    Rejected(
                        "energy",
                        step.detail() + "; the samples are kept and flagged here",
                        topic,
                        outcome.size,
                        doc["dev"],
                    ),
                    recv_ms,
                )
        elif kind == "status":
            dev = doc["dev"]
            acct = self.accounts.devices.get(dev)
            if acct is not None:  # a device not yet heard from has no jump to explain
                acct.note_status(doc)
            # wb_status is keyed by device and receive time: two statuses in one ms must not collide.
            t = max(recv_ms, self._last_status_ms.get(dev, 0) + 1)
            self._last_status_ms[dev] = t
            self.batch.records.append(rec.status(doc, t))
        elif kind == "meta":
            dev = doc["dev"]
            # Stored whenever it differs from what this collector last stored (a retained copy seen
            # again on reconnect is not a change), so scoring knows each channel's role at any time.
            if not _same_meta(self.meta.get(dev), doc):
                self.batch.records.append(rec.meta(doc, recv_ms))
            self.meta[dev] = doc
        elif kind == "phase":
            self.batch.records.append(rec.phase(doc))
        elif kind == "result":
            self.batch.records.append(rec.result(doc))
            if self.last_result is None or doc["t"] >= self.last_result["t"]:
                self.last_result = doc
        return outcome

    def _reject(self, rej: Rejected, recv_ms: int) -> None:
        self.rejected += 1
        if rej.dev and DEVICE_ID.match(rej.dev):
            self.accounts.get(rej.dev).note_reject()
        self._notice(rej, recv_ms)

    def _notice(self, rej: Rejected, recv_ms: int) -> None:
        self.reject_reasons[rej.reason] += 1
        # wb_reject is keyed by reason, collector and ms: keep its times distinct so none overwrites another.
        t = max(recv_ms, self._last_reject_ms + 1)
        self._last_reject_ms = t
        notice = rej.notice(t)
        if "dev" in notice and not DEVICE_ID.match(notice["dev"]):
            del notice["dev"]
        self.notices.append(notice)
        self.batch.records.append(rec.reject(self.collector_id, notice))
        self.last_rejects.append(notice)
        del self.last_rejects[:-20]

    # ------------------------------------------------------------------ health

    def add_health(self, now_ms: int, spool_bytes: int, spool_age_s: float) -> None:
        for dev, acct in self.accounts.devices.items():
            fields = acct.health()
            fields["spool_bytes"] = int(spool_bytes)
            fields["spool_age"] = float(spool_age_s)
            self.batch.records.append(rec.health(self.collector_id, dev, fields, now_ms))

    # ------------------------------------------------------------------ hand-over

    def take(self) -> tuple[Batch, list[dict[str, Any]]]:
        """The batch built so far and the reject notices to publish; both start afresh."""
        batch, notices = self.batch, self.notices
        self.batch, self.notices = Batch(), []
        return batch, notices

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "messages": self.messages,
            "accepted": self.accepted,
            "rejected": self.rejected,
            "energy_steps": self.energy_steps,
            "reject_reasons": dict(self.reject_reasons),
            "devices": len(self.accounts.devices),
        }
        totals = self.accounts.totals()
        out.update({f"samples_{k}" if k in ("received", "stored") else k: v for k, v in totals.items()})
        return out
