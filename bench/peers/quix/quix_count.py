"""Quix Streams peer for the Skein benchmark (bench/README.md).

Stateful per-key count: input key -> running count, one output record per input record,
value = the count as a decimal UTF-8 string. State lives in Quix's RocksDB store with a
changelog topic, so a restart on an empty state directory restores it from the changelog.

Speaks the contender protocol: JSON lines on stdout, e.g.
  {"event":"first-read","ts":1700000000000}
  {"event":"restore-start","ts":...}
  {"event":"restore-end","ts":...,"records":12345}

Run: bench/.venv/bin/python bench/peers/quix/quix_count.py --brokers B --input T --output T
     --group G --state-dir D [--mode eos|alos] [--commit-interval-ms N] [--client-config FILE.json]

--client-config: a JSON object of librdkafka connection properties (security.protocol,
sasl.mechanisms, sasl.username, sasl.password, ssl.ca.location, ...), written by the harness from
the SKEIN_* settings (bench/lib/security.ts).
"""

import argparse
import json
import logging
import sys
import time

from quixstreams import Application, State
from quixstreams.kafka.configuration import ConnectionConfig
from quixstreams.state import recovery as quix_recovery


def emit(event: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"event": event, "ts": int(time.time() * 1000), **fields}) + "\n")
    sys.stdout.flush()


# Restore instrumentation: wrap Quix's recovery entry point and its per-record apply step.
_restored = {"records": 0}
_orig_do_recovery = quix_recovery.RecoveryManager.do_recovery
_orig_recover_msg = quix_recovery.RecoveryPartition.recover_from_changelog_message


def _do_recovery(self: quix_recovery.RecoveryManager) -> None:
    # records is cumulative over the process' life, like the Kafka Streams peer's.
    emit("restore-start")
    _orig_do_recovery(self)
    emit("restore-end", records=_restored["records"])


def _recover_msg(self: quix_recovery.RecoveryPartition, changelog_message: object) -> None:
    _restored["records"] += 1
    _orig_recover_msg(self, changelog_message)  # type: ignore[arg-type]


quix_recovery.RecoveryManager.do_recovery = _do_recovery  # type: ignore[method-assign]
quix_recovery.RecoveryPartition.recover_from_changelog_message = _recover_msg  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--mode", choices=["eos", "alos"], default="eos")
    ap.add_argument("--commit-interval-ms", type=int, default=None)
    ap.add_argument("--client-config", default=None)
    a = ap.parse_args()

    connection: dict[str, object] = {"bootstrap.servers": a.brokers}
    if a.client_config is not None:
        with open(a.client_config, encoding="utf-8") as f:
            connection.update(json.load(f))

    kwargs: dict[str, object] = {}
    if a.commit_interval_ms is not None:
        kwargs["commit_interval"] = a.commit_interval_ms / 1000.0
    app = Application(
        broker_address=ConnectionConfig.from_librdkafka_dict(connection),
        consumer_group=a.group,
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once" if a.mode == "eos" else "at-least-once",
        state_dir=a.state_dir,
        loglevel=logging.WARNING,
        **kwargs,  # type: ignore[arg-type]
    )
    inp = app.topic(a.input, key_deserializer="str", value_deserializer="bytes")
    out = app.topic(a.output, key_serializer="str", value_serializer="str")

    first = {"seen": False}

    def count(_value: bytes, state: State) -> str:
        if not first["seen"]:
            first["seen"] = True
            emit("first-read")
        c = state.get("c", 0) + 1
        state.set("c", c)
        return str(c)

    sdf = app.dataframe(inp)
    sdf = sdf.apply(count, stateful=True)
    sdf.to_topic(out)
    app.run()


if __name__ == "__main__":
    main()
